"""ir.functor: dispatch by node class (MRO fallback, cached per functor class) and the iterative,
identity-memoised post-order walk."""

import sys

import pytest

from tvmpy.ir.functor import CHAIN_DEPTH, ChainFunctor, Functor, node_children, post_order
from tvmpy.ir.node import Node

pytestmark = pytest.mark.usefixtures("default_recursion_limit")  # tests/conftest.py


class Leaf(Node):
    __slots__ = ("name",)

    def __init__(self, name):
        self._init(name=name)


class Pair(Node):
    __slots__ = ("a", "b")
    _fields = ("a", "b")

    def __init__(self, a, b):
        self._init(a=a, b=b)


class Plus(Pair):
    __slots__ = ()


class Bag(Node):
    __slots__ = ("items", "table")
    _fields = ("items", "table")

    def __init__(self, items, table):
        self._init(items=items, table=table)


def test_dispatch_by_class_with_mro_fallback():
    class F(Functor):
        def visit_Leaf(self, n):
            return "leaf"

        def visit_Pair(self, n):
            return "pair"

        def generic_visit(self, n):
            return "other"

    f = F()
    assert f.visit(Leaf("x")) == "leaf"
    assert f.visit(Plus(Leaf("x"), Leaf("y"))) == "pair"  # no visit_Plus: its base's method
    assert f.visit(Bag([], {})) == "other"

    class G(F):
        def visit_Plus(self, n):
            return "plus"

    assert G().visit(Plus(Leaf("x"), Leaf("y"))) == "plus"
    assert F().visit(Plus(Leaf("x"), Leaf("y"))) == "pair"  # the subclass has its own cache


def test_dispatch_is_cached_per_functor_and_node_class():
    class F(Functor):
        def visit_Pair(self, n):
            return 1

    looked_up = []
    real = F._lookup.__func__

    def counting(cls, node_cls, prefix):
        looked_up.append((cls, node_cls))
        return real(cls, node_cls, prefix)

    F._lookup = classmethod(counting)
    try:
        f = F()
        for _ in range(5):
            f.visit(Plus(Leaf("a"), Leaf("b")))
            F().visit(Pair(Leaf("a"), Leaf("b")))
    finally:
        del F._lookup
    assert looked_up == [(F, Plus), (F, Pair)]
    assert F._dispatch_table[Plus] is F._dispatch_table[Pair] is F.__dict__["visit_Pair"]


def test_dispatch_prefix_second_family():
    class F(Functor):
        def _s_Pair(self, n):
            return "stmt"

    assert F.dispatch_prefix(Plus, "_s_") is F.__dict__["_s_Pair"]
    assert F.dispatch_prefix(Leaf, "_s_") is None


def test_node_children_flattens_containers():
    x, y, z = Leaf("x"), Leaf("y"), Leaf("z")
    assert node_children(Pair(x, y)) == [x, y]
    assert node_children(Bag([x, (y, 3)], {"k": z})) == [x, y, z]
    assert node_children(x) == []


def test_post_order_children_first_and_dag_once():
    x, y = Leaf("x"), Leaf("y")
    s = Pair(x, y)
    top = Pair(s, Pair(s, x))  # s and x are shared
    order = post_order(top)
    assert [id(n) for n in order] == [id(n) for n in (x, y, s, order[3], top)]
    assert order[3].a is s and len(order) == 5


def test_post_order_skip_and_several_roots():
    x, y = Leaf("x"), Leaf("y")
    s = Pair(x, y)
    top = Pair(s, x)
    assert post_order(top, skip={id(s)}) == [x, top]  # s is neither listed nor entered
    assert post_order([x, s, y]) == [x, y, s]


def test_post_order_is_iterative():
    e = Leaf("x")
    depth = 5 * sys.getrecursionlimit()
    for i in range(depth):
        e = Pair(e, Leaf(i)) if i % 2 else Pair(Leaf(i), e)
    order = post_order(e)
    assert len(order) == 2 * depth + 1 and order[-1] is e


def test_chain_functor_deep_chain_without_recursion_limit():
    class Depth(ChainFunctor):
        _chain_kinds = frozenset({Plus})

        def visit_Plus(self, n):
            return 1 + max(self.visit(n.a), self.visit(n.b))

        def visit_Leaf(self, n):
            return 0

    e = Leaf("x")
    n = 10 * sys.getrecursionlimit()
    for i in range(n):
        e = Plus(e, Leaf(i))
    f = Depth()
    assert f.visit(e) == n
    assert f._chain_memo is None and f._chain_depth == 0  # the memo lives for one visit
    short = Plus(Leaf("a"), Leaf("b"))
    assert f.visit(short) == 1 and CHAIN_DEPTH > 1
