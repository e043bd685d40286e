"""x86 schedules."""
