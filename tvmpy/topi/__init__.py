"""Operator library: compute definitions and per-target schedules (TVM's TOPI)."""
