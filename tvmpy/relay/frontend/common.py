"""Frontend helpers shared by the importers."""

from __future__ import annotations

__all__ = ["OpNotImplemented", "unsupported_error"]


class OpNotImplemented(NotImplementedError):
    """Raised once per import, listing every unsupported operator type and its node names."""


def unsupported_error(frontend: str, missing: dict[str, list[str]]) -> OpNotImplemented:
    lines = [f"  {op}: {', '.join(names)}" for op, names in sorted(missing.items())]
    return OpNotImplemented(
        f"{frontend}: {len(missing)} operator type(s) are not supported:\n" + "\n".join(lines))
