"""FuseOps: group operator calls into *primitive functions* by their pattern kinds (TVM's
``relay.transform.FuseOps``, src/relay/transforms/fuse_ops.cc, reproduced rule for rule).

What it does
Algorithm (the paper's operator fusion, as TVM implements it):

1. ``_ForwardGraph``: the dataflow graph indexed in post-DFS order. Each node knows its pattern
   kind (from the op registry; scalar constants are ELEMWISE, other constants, variables and
   calls of functions OPAQUE, tuples TUPLE, TupleGetItem INJECTIVE), its consumers with an *edge
   pattern* (a BROADCAST op whose argument already has the output's shape is ELEMWISE on that
   edge), and whether something outside the graph sees it (``extern_ref``: main's result).
2. ``_post_dominators``: the immediate post-dominator of every node (the least common ancestor
   of its consumers in the tree built in reverse topological order), with the worst pattern met
   on the way there. A node only fuses into its post-dominator, so every path from it is fused
   along and no computation is duplicated.
3. ``_Partitioner`` (three phases over the nodes in post-DFS order, union-find groups):
   phase 0: an OUT_ELEMWISE_FUSABLE op (conv2d, dense, pooling) fuses into its post-dominator
   when the edge there is ELEMWISE and every node on the way is at most BROADCAST; an
   ELEMWISE/BROADCAST op fuses into a post-dominator reached through INJECTIVE or COMM_REDUCE
   (nodes on the way at most INJECTIVE; the final one may be anything but OPAQUE/TUPLE, so it
   may already hold a conv2d). phase 1: the same for the ELEMWISE/BROADCAST rule, plus INJECTIVE
   ops and tuples fuse into an injective post-dominator, and an injective group (at most
   INJECTIVE on the way) into a post-dominating call of an op that reads its inputs through
   injective producers (op attribute ``TFuseInjectiveInputs``: ``nn.attention``, whose kernel
   then loads Q/K/V through their head-split views instead of a copy; the group stays that
   op's, nothing fuses after it). phase 2: injective ops fuse into a
   tuple that itself fused into injective consumers. COMM_REDUCE ops and OPAQUE nodes never
   fuse into what follows them (a reduction is a group's sink); two anchors (OUT_ELEMWISE_FUSABLE
   ops) never share a group; a group holds at most ``relay.FuseOps.max_depth`` (PassContext
   config, default 256 as in TVM) nodes; the pass raises Python's recursion limit so that
   lowering a group that deep does not overflow it (``ensure_recursion_room``).
4. ``_FuseMutator`` rewrites the graph: each group becomes
   ``Call(Function(params, body, attrs={"Primitive": 1, "Name": "fused_..."}), args)`` (contract
   C1 of the build pipeline): tensors crossing a group boundary become fresh typed parameters,
   tuple-typed values crossing it are passed field by field (so a Tuple feeding concatenate lands
   inside the concatenate's function, and a multi-output op's results reach their consumers as
   ``TupleGetItem`` outside), non-scalar constants stay outside as arguments.

When valid
Always: grouping decides which values are computed together, not what they are; no
computation is duplicated (a node fuses only into its post-dominator).

At fuse level 0 every node is its own group (each operator call becomes a one-op function).
``let`` bindings are inlined and ``TupleGetItem`` of a literal Tuple resolved first (operators
are pure); ``If`` and local closures are refused with NotImplementedError.

Example
    before:  %0 = nn.conv2d(%x, %W); %1 = add(%0, %b); nn.relu(%1)
    after:   %0 = fn (%p0, %p1, %p2, Primitive=1, Name="fused_nn_conv2d_add_nn_relu") {
                 nn.relu(add(nn.conv2d(%p0, %p1), %p2)) };  %0(%x, %W, %b)
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Generator
from typing import Any

from ...ir.functor import post_order
from ...transform import PassContext
from ..expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from ..op.registry import Op, OpPattern
from ..ty import TensorType, TupleType, Type, dim_equal, type_str
from ..type_infer import infer_type
from ..visitor import InlineLets, dataflow_post_order, post_order_visit
from .pass_infra import FunctionPass

__all__ = ["FuseOps", "fuse_function", "DEFAULT_MAX_DEPTH", "MAX_NAME_LENGTH"]

ELEMWISE = OpPattern.ELEMWISE
BROADCAST = OpPattern.BROADCAST
INJECTIVE = OpPattern.INJECTIVE
COMM_REDUCE = OpPattern.COMM_REDUCE
OUT_EWISE = OpPattern.OUT_ELEMWISE_FUSABLE
TUPLE = OpPattern.TUPLE
OPAQUE = OpPattern.OPAQUE
#: the op attribute of an operator whose kernel reads its inputs through fused injective
#: producers (phase 1 of the partition; the op's schedule inlines them)
FUSE_INJECTIVE_INPUTS = "TFuseInjectiveInputs"

DEFAULT_MAX_DEPTH = 256  # TVM's default for "relay.FuseOps.max_depth"
# A fused chain of n elementwise ops is an expression n calls deep, which lowering (te inlining,
# simplification, code generation) walks recursively, ~8 Python frames per call (te inlining:
# functor.visit -> inline.visit_Call -> generic_visit -> visit -> visit_ProducerLoad ...):
# 256 Sigmoids in one group need ~2,100 frames, past Python's default limit of 1,000. FuseOps
# raises the process's recursion limit to what its largest group needs (never lowers it), up
# to _MAX_RECURSION_LIMIT: these frames are Python frames (no C stack on 3.11+; a few hundred
# bytes each on 3.10, so 20,000 stay well inside a thread's 8 MiB stack)
_FRAMES_PER_NODE = 12
_MAX_RECURSION_LIMIT = 20_000
MAX_NAME_LENGTH = 80  # TVM truncates longer fused names and appends a hash
_SIMPLE_CONST_DTYPES = ("int32", "int64", "float32", "float64", "bool")


# ---------------------------------------------------------------------------------------------
# 1. the indexed forward graph


class _Node:
    __slots__ = ("ref", "index", "extern_ref", "outputs", "pattern", "fuses_inputs")

    def __init__(self) -> None:
        self.ref: Any = None
        self.index = -1
        self.extern_ref = False
        self.outputs: list[tuple[_Node, int]] = []  # (consumer, edge pattern)
        self.pattern = OPAQUE
        self.fuses_inputs = False  # an op call that takes injective producers into its group


def _is_primitive_fn(e: Any) -> bool:
    return isinstance(e, Function) and bool(e.attrs.get("Primitive"))


def _same_shape(a: Type, b: Type) -> bool:
    return (isinstance(a, TensorType) and isinstance(b, TensorType) and len(a.shape) == len(b.shape)
            and all(dim_equal(x, y) for x, y in zip(a.shape, b.shape)))


class _ForwardGraph:
    """Nodes of one function's dataflow graph in post-DFS order (children before parents, in
    argument order, as TVM's ``IndexedForwardGraph::Creator``)."""

    def __init__(self, func: Function):
        self.node_map: dict[int, _Node] = {}
        self.post_dfs: list[_Node] = []
        self._keep: list[Any] = []
        for p in func.params:
            self._update(p, None, OPAQUE)
        self._update(func.body, None, OPAQUE)
        for p in func.params:
            self._add(p)
        self._build(func.body)

    def _node(self, e: Any) -> _Node:
        n = self.node_map.get(id(e))
        if n is None:
            n = self.node_map[id(e)] = _Node()
            self._keep.append(e)
        return n

    def _update(self, e: Any, parent: _Node | None, pattern: int) -> None:
        n = self._node(e)
        if parent is not None:
            n.outputs.append((parent, pattern))
        else:
            n.extern_ref = True

    def _add(self, e: Any) -> None:
        n = self._node(e)
        if n.ref is not None:
            return
        n.ref = e
        n.index = len(self.post_dfs)
        self.post_dfs.append(n)

    def _build(self, root: Any) -> None:
        for e in post_order(root, self._pre_visit):
            self._add(e)

    def _pre_visit(self, e: Any) -> list[Any]:
        """Set ``e``'s pattern and its argument edges; return the children to visit."""
        node = self._node(e)
        if isinstance(e, Var):
            return []
        if isinstance(e, Constant):
            scalar = len(e.data.shape) == 0 and e.data.dtype in _SIMPLE_CONST_DTYPES
            node.pattern = ELEMWISE if scalar else OPAQUE
            return []
        if isinstance(e, Call):
            if isinstance(e.op, Op):
                pattern = e.op.pattern
                rtype = e.checked_type
                for a in e.args:
                    edge = pattern
                    if edge == BROADCAST and _same_shape(rtype, a.checked_type):
                        edge = ELEMWISE
                    self._update(a, node, edge)
                node.pattern = pattern
                node.fuses_inputs = bool(e.op.get_attr(FUSE_INJECTIVE_INPUTS))
                return list(e.args)
            if not (_is_primitive_fn(e.op) or isinstance(e.op, GlobalVar)):
                raise NotImplementedError(
                    f"FuseOps: calling a {type(e.op).__name__} of type "
                    f"{type_str(e.op.checked_type)} is not supported; only operator calls, "
                    "calls of primitive functions and of global functions can be fused around")
            node.pattern = OPAQUE  # an already fused function, or a call of another global
            for a in e.args:
                self._update(a, node, OPAQUE)
            return list(e.args)
        if isinstance(e, Tuple):
            node.pattern = TUPLE
            for f in e.fields:
                if isinstance(f.checked_type, TensorType):
                    self._update(f, node, INJECTIVE)
                else:
                    self._update(f, None, OPAQUE)
            return list(e.fields)
        if isinstance(e, TupleGetItem):
            ttype = e.tuple_value.checked_type
            if not isinstance(ttype, TupleType):
                raise TypeError(f"FuseOps: TupleGetItem of a non-tuple value of type "
                                f"{type_str(ttype)}")
            if all(isinstance(t, TensorType) for t in ttype.fields):
                node.pattern = INJECTIVE
                self._update(e.tuple_value, node, INJECTIVE)
            else:
                self._update(e.tuple_value, None, OPAQUE)
            return [e.tuple_value]
        raise _unsupported(e)


def _unsupported(e: Any) -> Exception:
    kind = type(e).__name__
    if isinstance(e, (If, Function)):
        return NotImplementedError(
            f"FuseOps: a {kind} inside the function body is not supported; FuseOps expects a "
            "dataflow graph of operator calls, variables, constants, tuples and tuple items "
            "(conditionals and local functions cannot be fused around)")
    return NotImplementedError(f"FuseOps: unsupported expression {kind}: {e!r}")


# ---------------------------------------------------------------------------------------------
# 2. the post-dominator tree


class _DomNode:
    __slots__ = ("gindex", "parent", "depth", "pattern")

    def __init__(self, gindex: int, parent: _DomNode | None, depth: int, pattern: int):
        self.gindex = gindex  # the graph node's post-DFS index
        self.parent = parent
        self.depth = depth
        self.pattern = pattern  # the worst edge pattern on the way to the parent


def _post_dominators(graph: _ForwardGraph) -> list[_DomNode]:
    tree: list[_DomNode | None] = [None] * len(graph.post_dfs)
    for gnode in reversed(graph.post_dfs):  # consumers come later in post-DFS order
        if gnode.extern_ref or not gnode.outputs:
            tree[gnode.index] = _DomNode(gnode.index, None, 1, OPAQUE)
            continue
        pattern = ELEMWISE
        parent: _DomNode | None = None
        for k, (out, edge) in enumerate(gnode.outputs):
            onode = tree[out.index]
            assert onode is not None
            if k == 0:
                parent = onode
            else:
                parent, pattern = _lca(parent, onode, pattern)
            pattern = max(pattern, edge)
        tree[gnode.index] = _DomNode(gnode.index, parent, parent.depth + 1 if parent else 1, pattern)
    return tree  # type: ignore[return-value]


def _lca(lhs: _DomNode | None, rhs: _DomNode | None, pattern: int) -> tuple[_DomNode | None, int]:
    while lhs is not rhs:
        if lhs is None or rhs is None:
            return None, pattern
        if lhs.depth < rhs.depth:
            pattern = max(pattern, rhs.pattern)
            rhs = rhs.parent
        elif rhs.depth < lhs.depth:
            pattern = max(pattern, lhs.pattern)
            lhs = lhs.parent
        else:
            pattern = max(pattern, lhs.pattern, rhs.pattern)
            lhs, rhs = lhs.parent, rhs.parent
    return lhs, pattern


# ---------------------------------------------------------------------------------------------
# 3. the partition into groups


class _Group:
    __slots__ = ("parent", "pattern", "root", "anchor", "num_nodes")

    def __init__(self, pattern: int, root: _Node):
        self.parent: _Group | None = None
        self.pattern = pattern
        self.root = root  # the node whose value leaves the group
        self.anchor = root if pattern == OUT_EWISE else None
        self.num_nodes = 1

    def find_root(self) -> _Group:
        g = self
        while g.parent is not None:
            g = g.parent
        h = self
        while h.parent is not None:  # path compression
            h.parent, h = g, h.parent
        return g


class _Partitioner:
    def __init__(self, fuse_level: int, max_depth: int):
        self.fuse_level = fuse_level
        self.max_depth = max_depth
        self.groups: list[_Group] = []
        self.too_deep: set[int] = set()  # nodes whose fusion would pass max_depth

    def partition(self, graph: _ForwardGraph) -> list[_Group]:
        self.groups = [_Group(n.pattern, n) for n in graph.post_dfs]
        self.too_deep = set()
        if self.fuse_level == 0:
            return self.groups
        dom = _post_dominators(graph)
        for phase in range(3):
            self._run(graph, dom, phase)
        return self.groups

    def _run(self, graph: _ForwardGraph, dom: list[_DomNode], phase: int) -> None:
        for nid, gnode in enumerate(graph.post_dfs):
            dnode = dom[nid]
            group = self.groups[nid]
            if group.pattern == OPAQUE or dnode.parent is None:
                continue
            sink = graph.post_dfs[dnode.parent.gindex]
            if nid in self.too_deep or self._too_deep(gnode, sink):
                self.too_deep.add(nid)  # for good: the counts only grow
                continue
            sink_group = self.groups[sink.index]
            if phase == 2:
                # fuse injective ops into an intermediate tuple already fused into its consumers
                if group.pattern > INJECTIVE:
                    continue
                sink_root = sink_group.find_root()
                if sink_root.pattern == TUPLE:
                    continue
                if sink_group.pattern == TUPLE and sink_root.pattern <= INJECTIVE:
                    if self._check_path(gnode, sink, lambda k, s: k <= INJECTIVE):
                        self._commit(gnode, sink)
                continue
            if group.find_root() is sink_group.find_root():
                continue
            if sink_group.pattern == TUPLE:
                continue  # do not fuse into a tuple (phase 2 may)
            if group.pattern == OUT_EWISE:
                if phase != 0:
                    continue
                if dnode.pattern == ELEMWISE and self._check_path(
                        gnode, sink, lambda k, s: k <= BROADCAST):
                    self._commit(gnode, sink)
            elif group.pattern <= BROADCAST:
                if dnode.pattern <= INJECTIVE or dnode.pattern == COMM_REDUCE:
                    if self._check_path(gnode, sink, _ewise_path_ok):
                        self._commit(gnode, sink)
                elif phase == 1 and self._into_reader(gnode, sink):
                    self._commit(gnode, sink)
            elif group.pattern in (INJECTIVE, TUPLE):
                if phase != 1:
                    continue  # after phase 0, so that conv2d groups finish first
                if self._check_path(gnode, sink, lambda k, s: k <= INJECTIVE):
                    self._commit(gnode, sink)
                elif group.pattern == INJECTIVE and self._into_reader(gnode, sink):
                    self._commit(gnode, sink)
            # COMM_REDUCE: never fused into what follows it

    def _into_reader(self, src: _Node, sink: _Node) -> bool:
        """Whether ``src``'s (injective) group may join ``sink``, a call of an op that takes
        injective producers into its group (``TFuseInjectiveInputs``): ``src``'s group (its
        root: not one that already holds an anchor) and every node on the way at most
        INJECTIVE."""
        return (sink.fuses_inputs and self.groups[src.index].find_root().pattern <= INJECTIVE
                and self._check_path(src, sink, lambda k, is_sink: is_sink or k <= INJECTIVE))

    def _check_path(self, src: _Node, sink: _Node, cond: Any) -> bool:
        """Every node on every path from ``src`` (excluded) to ``sink`` (included) satisfies
        ``cond(group pattern, is_sink)``."""
        visited: set[int] = set()
        stack = [out for out, _ in src.outputs]
        while stack:
            n = stack.pop()
            if n.index in visited:
                continue
            visited.add(n.index)
            if not cond(self.groups[n.index].find_root().pattern, n is sink):
                return False
            if n is not sink:
                stack.extend(out for out, _ in n.outputs)
        return True

    def _commit(self, src: _Node, sink: _Node) -> None:
        """Merge every node on the paths from ``src`` to ``sink`` into ``sink``'s group."""
        target = self.groups[sink.index]
        visited: set[int] = set()
        stack = [src]
        while stack:
            n = stack.pop()
            if n.index in visited:
                continue
            visited.add(n.index)
            self._merge(self.groups[n.index], target)
            if n is not sink:
                stack.extend(out for out, _ in n.outputs)

    @staticmethod
    def _merge(child: _Group, parent: _Group) -> None:
        child, parent = child.find_root(), parent.find_root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor is not None:
            assert parent.anchor is None, "FuseOps: two anchor ops in one group"
            parent.anchor = child.anchor
            parent.pattern = max(parent.pattern, child.pattern)

    def _too_deep(self, child: _Node, sink: _Node) -> bool:
        """Whether ``sink``'s group would pass ``max_depth`` nodes once ``child`` and the paths
        from it are added. The walk stops as soon as the count does, so it visits at most
        ``max_depth + 1`` nodes however far the sink (a DAG's post-dominator may be its
        output, thousands of nodes on). The count never decreases (groups only grow), so a
        node too deep in one phase is too deep in the next ones."""
        limit = self.max_depth
        total = self.groups[sink.index].find_root().num_nodes
        visited: set[int] = set()
        stack = [child]
        while stack:
            n = stack.pop()
            if n is sink or n.index in visited:
                continue
            visited.add(n.index)
            total += self.groups[n.index].num_nodes
            if total > limit:
                return True
            stack.extend(out for out, _ in n.outputs)
        return total > limit


def _ewise_path_ok(kind: int, is_sink: bool) -> bool:
    # elemwise/broadcast/injective ops on parallel branches may join an elemwise anchor; the
    # sink may already be a reduction's or a conv2d's group
    if not is_sink:
        return kind <= INJECTIVE
    return kind <= INJECTIVE or kind in (COMM_REDUCE, OUT_EWISE)


def _final_groups(graph: _ForwardGraph, groups: list[_Group]) -> dict[int, _Group]:
    """id(expr) -> its group's root. A group whose root is a TupleGetItem of a tuple computed in
    the same group gives the item back as its own group, so that every fused function returns
    what its operator computes (contract C1: a body is an operator call)."""
    gmap = {id(n.ref): groups[n.index].find_root() for n in graph.post_dfs}
    for n in graph.post_dfs:
        e = n.ref
        g = gmap[id(e)]
        if isinstance(e, TupleGetItem) and g.root is n and gmap[id(e.tuple_value)] is g:
            single = _Group(INJECTIVE, n)
            gmap[id(e)] = single
            g.root = graph.node_map[id(e.tuple_value)]
            g.num_nodes -= 1
    return gmap


# ---------------------------------------------------------------------------------------------
# 4. rewriting the graph


class _GroupInfo:
    __slots__ = ("params", "args", "by_arg")

    def __init__(self) -> None:
        self.params: list[Var] = []
        self.args: list[RelayExpr] = []
        self.by_arg: dict[int, Var] = {}


class _FuseMutator:
    def __init__(self, gmap: dict[int, _Group]):
        self.gmap = gmap
        self.memo: dict[int, RelayExpr] = {}
        self.info: dict[int, _GroupInfo] = {}
        self._items: dict[tuple[int, int], TupleGetItem] = {}
        self._keep: list[Any] = []

    def visit(self, e: Any) -> Any:
        """The rewritten ``e``. The rules below are generators that yield each node whose
        rewritten form they need; this loop runs them with an explicit stack, in the order a
        recursive evaluation would take (a fused function's parameters keep their order), for
        graphs and groups of any depth."""
        r = self.memo.get(id(e))
        if r is not None:
            return r
        stack = [(e, self._rewrite(e))]
        value = None
        while stack:
            node, rule = stack[-1]
            try:
                need = rule.send(value)
            except StopIteration as done:
                stack.pop()
                value = self.memo[id(node)] = done.value
                self._keep.append(node)
                continue
            value = self.memo.get(id(need))
            if value is None:
                stack.append((need, self._rewrite(need)))
        return self.memo[id(e)]

    def _rewrite(self, e: Any) -> Generator[Any, Any, Any]:
        if isinstance(e, (Var, Constant)):
            return e
        if isinstance(e, Call):
            args = []
            if not isinstance(e.op, Op):  # a call of an already fused function: kept
                for a in e.args:
                    args.append((yield a))
                return Call(e.op, args, e.attrs)
            if e.op.name == "annotation.stop_fusion":  # a group boundary (OPAQUE): dropped
                return (yield e.args[0])
            g = self.gmap[id(e)]
            for a in e.args:
                args.append((yield from self._arg(a, g)))
            new = Call(e.op, args, e.attrs)
            return self._function(g, new) if g.root.ref is e else new
        if isinstance(e, Tuple):
            g = self.gmap[id(e)]
            fields = []
            for f in e.fields:
                fields.append((yield f) if g.root.ref is e else (yield from self._arg(f, g)))
            return Tuple(fields)
        if isinstance(e, TupleGetItem):
            g = self.gmap[id(e)]
            if self.gmap[id(e.tuple_value)] is not g:  # computed by another group: outside
                item = self._item((yield e.tuple_value), e.index)
                return item if g.root.ref is e else self._param(g, item, e.checked_type)
            return TupleGetItem((yield e.tuple_value), e.index)
        raise _unsupported(e)

    def _arg(self, a: RelayExpr, g: _Group) -> Generator[Any, Any, RelayExpr]:
        """Argument ``a`` as seen from inside group ``g`` (a rule: yields what it needs)."""
        if self.gmap[id(a)] is g:
            return (yield a)
        t = a.checked_type
        if isinstance(t, TupleType):  # tuples cross a boundary field by field
            if isinstance(a, Tuple):
                fields = []
                for f in a.fields:
                    fields.append((yield from self._arg(f, g)))
                return Tuple(fields)
            outside = yield a
            return Tuple([self._fields_in(self._item(outside, i), ft, g)
                          for i, ft in enumerate(t.fields)])
        return self._param(g, (yield a), t)

    def _fields_in(self, outside: RelayExpr, t: Type, g: _Group) -> RelayExpr:
        if isinstance(t, TupleType):
            return Tuple([self._fields_in(self._item(outside, i), ft, g)
                          for i, ft in enumerate(t.fields)])
        return self._param(g, outside, t)

    def _item(self, tup: RelayExpr, index: int) -> RelayExpr:
        if isinstance(tup, Tuple):
            return tup.fields[index]
        key = (id(tup), index)
        item = self._items.get(key)
        if item is None:
            item = self._items[key] = TupleGetItem(tup, index)
            self._keep.append(tup)
        return item

    def _param(self, g: _Group, outside: RelayExpr, t: Type) -> Var:
        if not isinstance(t, TensorType):
            raise TypeError(f"FuseOps: a value of type {type_str(t)} crosses a fused function's "
                            "boundary; only tensors (and tuples of tensors) can be parameters "
                            "of a primitive function")
        info = self.info.setdefault(id(g), _GroupInfo())
        p = info.by_arg.get(id(outside))
        if p is None:
            p = Var(f"p{len(info.params)}", t)
            info.params.append(p)
            info.args.append(outside)
            info.by_arg[id(outside)] = p
        return p

    def _function(self, g: _Group, body: RelayExpr) -> Call:
        info = self.info.get(id(g)) or _GroupInfo()
        fn = Function(info.params, body, attrs={"Primitive": 1, "Name": fused_name(body)})
        return Call(fn, info.args)


def fused_name(body: RelayExpr) -> str:
    """TVM's readable name: "fused_" + the operator names in post order, dots as underscores;
    names longer than MAX_NAME_LENGTH are truncated and get a hash suffix."""
    names = [e.op.name.replace(".", "_") for e in dataflow_post_order(body)
             if isinstance(e, Call) and isinstance(e.op, Op)]
    name = "_".join(["fused", *names])
    if len(name) > MAX_NAME_LENGTH:
        digest = hashlib.sha1(name.encode()).hexdigest()[:16]
        name = name[:MAX_NAME_LENGTH] + "_" + digest
    return name


class _Normalize(InlineLets):
    """``let v = e; body`` -> body with ``e`` for ``v`` (operators are pure, see the package
    docstring) and ``TupleGetItem(Tuple(fs), i)`` -> ``fs[i]``, so that fusion sees a plain
    dataflow graph (primitive functions are left alone; other local functions are refused
    later)."""

    def visit_tuple_getitem(self, t: TupleGetItem) -> RelayExpr:
        new = super().visit_tuple_getitem(t)
        if isinstance(new, TupleGetItem) and isinstance(new.tuple_value, Tuple):
            return new.tuple_value.fields[new.index]
        return new


def _normalize(func: Function, mod: Any) -> Function:
    found = [False]

    def f(e: Any) -> None:
        if isinstance(e, Let) or (isinstance(e, TupleGetItem) and isinstance(e.tuple_value, Tuple)):
            found[0] = True

    post_order_visit(func.body, f)
    if not found[0]:
        return func
    new = Function(func.params, _Normalize().visit(func.body), func.ret_type, attrs=func.attrs)
    return infer_type(new, mod)  # type: ignore[return-value]


def fuse_function(func: Function, fuse_level: int = 1, max_depth: int = DEFAULT_MAX_DEPTH,
                  mod: Any = None) -> Function:
    """Fuse the operator calls of a typed ``func`` (``InferType`` ran on it; ``mod`` resolves
    global calls if it has any); returns the new function (the pass re-types the module)."""
    if _is_primitive_fn(func):
        return func
    for p in func.params:
        if p.type_annotation is None:
            raise TypeError(f"FuseOps: parameter %{p.name_hint} has no type annotation")
    func = _normalize(func, mod)
    graph = _ForwardGraph(func)
    groups = _Partitioner(fuse_level, max_depth).partition(graph)
    gmap = _final_groups(graph, groups)
    body = _FuseMutator(gmap).visit(func.body)
    return Function(func.params, body, func.ret_type, attrs=func.attrs)


def _max_depth(ctx: PassContext) -> int:
    v = ctx.config.get("relay.FuseOps.max_depth", DEFAULT_MAX_DEPTH)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"PassContext config relay.FuseOps.max_depth must be a positive int, "
                         f"got {v!r}")
    return v


class FuseOps(FunctionPass):
    """``relay.transform.FuseOps(fuse_opt_level=-1)``: -1 takes the PassContext's opt_level;
    level 0 puts every operator call in its own primitive function, >= 1 applies the fusion
    rules. Registered at opt_level 0 (it always runs in a build: the graph executor calls
    primitive functions only)."""

    def __init__(self, fuse_opt_level: int = -1):
        super().__init__(name="FuseOps", opt_level=0)
        if isinstance(fuse_opt_level, bool) or not isinstance(fuse_opt_level, int):
            raise TypeError(f"FuseOps: fuse_opt_level must be an int, got {fuse_opt_level!r}")
        self.fuse_opt_level = fuse_opt_level

    def transform_function(self, func: Function, mod: Any, ctx: PassContext) -> Function:
        level = ctx.opt_level if self.fuse_opt_level == -1 else self.fuse_opt_level
        depth = _max_depth(ctx)
        ensure_recursion_room(depth)
        return fuse_function(func, level, depth, mod)


def ensure_recursion_room(max_depth: int) -> None:
    """Raise Python's recursion limit (never lower it) so that lowering a fused group of
    ``max_depth`` nodes, an expression up to that many calls deep, does not overflow it."""
    need = min(_FRAMES_PER_NODE * max_depth + 1000, _MAX_RECURSION_LIMIT)
    if sys.getrecursionlimit() < need:
        sys.setrecursionlimit(need)
