"""Compilation targets."""

from .target import Target, current_target  # noqa: F401
