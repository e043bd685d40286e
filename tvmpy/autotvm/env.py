"""Global AutoTVM switches (TVM's ``autotvm.env.GLOBAL_SCOPE``)."""

from __future__ import annotations

__all__ = ["AutotvmGlobalScope", "GLOBAL_SCOPE"]


class AutotvmGlobalScope:
    """``in_tuning``: a tuner is measuring (templates may skip expensive checks);
    ``silent``: no fallback warning."""

    def __init__(self) -> None:
        self.in_tuning = False
        self.silent = False


GLOBAL_SCOPE = AutotvmGlobalScope()
