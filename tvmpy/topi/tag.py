"""Operator tags (TVM's ``topi.tag``): the pattern kind a compute declares, read by schedules
(``schedule_injective`` inlines what is injective) and by the graph level's fusion rules."""

ELEMWISE = "elemwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"


def is_broadcast(tag: str) -> bool:
    """Elementwise and broadcast ops (and tags starting with them) are broadcast-like."""
    return tag.startswith((ELEMWISE, BROADCAST))


def is_injective(tag: str) -> bool:
    """Every elementwise/broadcast/injective op (tag or tag prefix) is injective."""
    return is_broadcast(tag) or tag.startswith(INJECTIVE)
