"""x86 schedules."""

from .injective import (  # noqa: E402,F401
    schedule_broadcast,
    schedule_concatenate,
    schedule_elemwise,
    schedule_injective,
    schedule_injective_from_existing,
)
from .reduction import schedule_reduce  # noqa: E402,F401
