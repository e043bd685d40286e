"""Data layout names: the channel-blocked family ``NCHW{c}c`` (``NCW{c}c``, ``NCDHW{c}c``) that
AlterOpLayout's x86 convolutions and pools compute in, the channel axis split into ``C/c``
outer and ``c`` inner. The one place such a name is built or parsed (relay, topi and autotvm
read it; TVM's ``tvm.tir.layout("NCHW16c")`` in its simplest form)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

__all__ = ["blocked", "block_of"]


def blocked(c: int, base: str = "NCHW") -> str:
    """The blocked layout name of ``base`` with channel block ``c``: "NCHW16c"."""
    return f"{base}{c}c"


@cache
def _pattern(base: str) -> re.Pattern[str]:
    return re.compile(re.escape(base) + r"(\d+)c")


def block_of(layout: Any, base: str = "NCHW") -> int | None:
    """``c`` when ``layout`` is ``base`` blocked by ``c`` channels ("NCHW16c" -> 16), else None
    (a plain layout, None, or anything else)."""
    if layout is None:
        return None
    m = _pattern(base).fullmatch(str(layout))
    return int(m.group(1)) if m else None
