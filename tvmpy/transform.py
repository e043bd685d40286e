"""``tvm.transform.PassContext``: build options for ``tvm.lower`` / ``tvm.build``.

Supported now: ``config={"tir.add_lower_pass": [(phase, pass), ...]}`` (TVM's hook for custom
loop-IR passes; ``pass`` maps a PrimFunc to a PrimFunc, e.g. a
``tvm.tir.transform.prim_func_pass``). Phases 0 and 1 run on the loop IR of the schedule,
before the tir pipeline (so buffers are still multi-dimensional, unlike TVM's phase 1 which
follows storage flattening). ``opt_level``, ``required_pass`` and ``disabled_pass`` select the
relay graph passes (``relay.transform.Sequential``; the tir pipeline is fixed); other config keys
are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["PassContext"]

_KNOWN_CONFIG = ("tir.add_lower_pass", "relay.FuseOps.max_depth", "relay.x86.winograd")


class PassContext:
    """``with tvm.transform.PassContext(opt_level=3, config={...}):`` around lower/build."""

    _stack: list[PassContext] = []

    def __init__(self, opt_level: int = 2, required_pass: Sequence[str] | None = None,
                 disabled_pass: Sequence[str] | None = None, config: dict | None = None):
        self.opt_level = int(opt_level)
        self.required_pass = list(required_pass or [])
        self.disabled_pass = list(disabled_pass or [])
        self.config = dict(config or {})
        for key in self.config:
            if key not in _KNOWN_CONFIG:
                raise ValueError(f"PassContext: unsupported config {key!r}; supported: "
                                 f"{', '.join(_KNOWN_CONFIG)}")
        self.lower_passes = self._lower_passes(self.config.get("tir.add_lower_pass", []))

    @staticmethod
    def _lower_passes(entries: Any) -> list[tuple[int, Callable[..., Any]]]:
        out = []
        for e in entries:
            if not isinstance(e, (list, tuple)) or len(e) != 2 or not callable(e[1]):
                raise TypeError("PassContext: tir.add_lower_pass takes (phase, pass) pairs, "
                                f"got {e!r}")
            phase = int(e[0])
            if phase not in (0, 1):
                raise NotImplementedError(
                    f"PassContext: tir.add_lower_pass phase {phase} is not supported; phases 0 "
                    "and 1 run on the loop IR before the tir pipeline")
            out.append((phase, e[1]))
        return sorted(out, key=lambda p: p[0])

    def pass_enabled(self, name: str, opt_level: int) -> bool:
        """TVM's rule: disabled wins, then required, then ``opt_level >= the pass's``."""
        if name in self.disabled_pass:
            return False
        return name in self.required_pass or self.opt_level >= opt_level

    @staticmethod
    def current() -> PassContext:
        """The innermost active context (a default one outside any ``with``)."""
        return PassContext._stack[-1] if PassContext._stack else PassContext()

    def __enter__(self) -> PassContext:
        PassContext._stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        PassContext._stack.pop()
