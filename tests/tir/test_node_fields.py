"""IR node classes declare their fields twice: in ``__slots__`` (storage) and as class annotations
(types, for mypy). The two lists must agree, and the annotations must not change the nodes."""

import inspect
import pickle

import pytest

from tvmpy import te, tir
from tvmpy.ir.node import Node, structural_equal
from tvmpy.te import tensor as te_tensor
from tvmpy.tir import buffer, expr, function, stmt

MODULES = (expr, stmt, buffer, function, te_tensor)
NODE_CLASSES = sorted(
    {c for m in MODULES for c in vars(m).values() if inspect.isclass(c) and issubclass(c, Node) and c is not Node},
    key=lambda c: (c.__module__, c.__name__),
)


def _annotations(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ for name in klass.__dict__.get("__annotations__", {})}


@pytest.mark.parametrize("cls", NODE_CLASSES, ids=lambda c: c.__name__)
def test_every_slot_has_a_type_annotation(cls):
    slots = {s for s in cls._all_slots() if s != "__weakref__"}
    missing = slots - _annotations(cls)
    assert not missing, f"{cls.__name__}: annotate the fields {sorted(missing)} next to __slots__"


@pytest.mark.parametrize("cls", NODE_CLASSES, ids=lambda c: c.__name__)
def test_every_annotation_is_a_slot(cls):
    own = set(cls.__dict__.get("__annotations__", {}))
    stray = own - set(cls._all_slots())
    # a base class may type a field that each of its subclasses stores (Operation._outputs)
    for sub in cls.__subclasses__():
        stray -= set(sub._all_slots())
    assert not stray, f"{cls.__name__}: annotations {sorted(stray)} name no slot"


@pytest.mark.parametrize("cls", NODE_CLASSES, ids=lambda c: c.__name__)
def test_annotations_keep_nodes_slotted(cls):
    assert not hasattr(object.__new__(cls), "__dict__")


def test_nodes_stay_immutable_and_picklable():
    n, i = tir.Var("n"), tir.Var("i")
    buf = tir.decl_buffer((n,), "float32", name="A")
    store = stmt.BufferStore(buf, buf[i] * 2.0 + 1.0, [i])
    loop = stmt.For(i, 0, n, stmt.ForKind.SERIAL, store)
    f = tir.PrimFunc([buf.data, n], loop, {buf.data: buf})
    for node in (f, loop, store, buf, store.value, tir.Range(0, n)):
        with pytest.raises(AttributeError):
            node.dtype = "int8"
        assert structural_equal(pickle.loads(pickle.dumps(node)), node, map_free_vars=True)
    B = te.compute((n,), lambda j: j * 2, name="B")
    with pytest.raises(AttributeError):
        B.op.name = "C"


def test_allocate_has_tvm_fields():
    """TVM's tir.Allocate fields (buffer_var, dtype, extents), read by passes written for TVM."""
    n = te.var("n")
    buf = tir.decl_buffer((n, 7), "float16", name="T")
    alloc = stmt.Allocate(buf, stmt.Evaluate(0))
    assert alloc.buffer_var is buf.data and alloc.buffer_var.name == "T"
    assert alloc.dtype == "float16"
    assert len(alloc.extents) == 2 and alloc.extents[0] is n and int(alloc.extents[1]) == 7



class _Memo(Node):
    """A node with a slot filled on first use (as ComputeOp's input tensors)."""

    __slots__ = ("value", "_memo")
    _fields = ("value",)
    value: object
    _memo: object


def test_pickle_carries_every_slot_set_or_not():
    """Nodes pickle their slots by position (one attrgetter per class: a kernel's loop IR has
    ~10^5 nodes); a node with a slot left unset round-trips too, set or unset."""
    a = object.__new__(_Memo)
    a._init(value=tir.const(3))
    copy = pickle.loads(pickle.dumps(a))
    assert not hasattr(copy, "_memo") and copy.value.value == 3
    a._init(_memo=(1, "x"))
    copy = pickle.loads(pickle.dumps(a))
    assert copy._memo == (1, "x") and copy.value.value == 3
    for node in (tir.IntImm("int8", -3), tir.StringImm("s"), tir.Broadcast(tir.const(1.5), 4)):
        copy = pickle.loads(pickle.dumps(node))
        assert type(copy) is type(node) and structural_equal(copy, node)


def test_compute_input_tensors_are_found_once_and_kept():
    n = tir.Var("n")
    A = te.placeholder((n,), name="A")
    C = te.placeholder((n,), name="C")
    B = te.compute((n,), lambda j: A[j] * 2.0 + C[j // 2] + A[j // 3], name="B")
    first = B.op.input_tensors
    assert [t.op.name for t in first] == ["A", "C"]
    first.append(None)  # the caller's list: the op's own record is not changed
    assert [t.op.name for t in B.op.input_tensors] == ["A", "C"]
