"""``tir.call_packed``: call a function of the PackedFunc registry from generated code.

``call_packed("name", *args)`` is ``Call("int32", "tvm_call_packed", [StringImm(name), *args])``.
Each :class:`~tvmpy.tir.buffer.Buffer` argument becomes a DLTensor built on the stack at the call
(``tvm_stack_make_array(data, tvm_stack_make_shape(*shape), strides, ndim, type_annotation,
elem_offset)``: TVM's form; strides ``0`` when compact), scalars are passed as int64 / double,
strings as ``const char*``; the
DLTensors (and a Python function's NDArray views of them) are valid during the call only. The code generators (codegen/llvm_packed.py, codegen/c_packed.py) lower it to one lookup
per name per library (cached) and one indirect C call per execution; the call's value is the
function's return value (int32 unless another dtype is asked for), and a failure (the function
raised, or no function of that name is registered) makes the kernel fail with its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir import dtype as dt
from .buffer import Buffer
from .expr import Call, IntImm, PrimExpr, StringImm, Var, const, convert
from .functor import ir_transform

__all__ = ["call_packed", "call_packed_lowered", "stack_make_array", "mark_read_only",
           "PACKED_OPS"]

#: the ops of this module (side effects: passes must keep them, analyses see their buffers)
PACKED_OPS = ("tvm_call_packed", "tvm_stack_make_array", "tvm_stack_make_shape")


def stack_make_array(buf: Buffer) -> PrimExpr:
    """The DLTensor of ``buf`` for a packed call (TVM's ``tvm_stack_make_array``)."""
    shape = Call("handle", "tvm_stack_make_shape", list(buf.shape))
    strides: PrimExpr = (Call("handle", "tvm_stack_make_shape", list(buf.strides)) if buf.strides
                         else IntImm("int32", 0))
    return Call("handle", "tvm_stack_make_array",
                [buf.data, shape, strides, IntImm("int32", buf.ndim), const(0, buf.dtype),
                 buf.elem_offset])


def mark_read_only(body: Any, buffers: Sequence[Buffer]) -> Any:
    """Flag the DLTensors of ``buffers`` in ``body`` as only read (a 7th argument ``1`` of
    ``tvm_stack_make_array``): te.extern's inputs. Unflagged ones count as written (the ABI's
    ``written`` flag, which the runtime's aliasing check reads), so ``f(a, a, c)`` stays legal
    for an extern stage reading ``a`` twice."""
    data = {id(b.data) for b in buffers}

    def post(n: Any) -> Any:
        if (isinstance(n, Call) and n.op == "tvm_stack_make_array" and len(n.args) == 6
                and id(n.args[0]) in data):
            return Call(n.dtype, n.op, [*n.args, IntImm("int32", 1)])
        return None

    return ir_transform(body, None, post, ["tir.Call"])


def _arg(k: int, a: Any) -> PrimExpr:
    if isinstance(a, Buffer):
        return stack_make_array(a)
    if type(a).__name__ == "Tensor" and hasattr(a, "op"):
        raise TypeError(f"call_packed: argument {k} is a te.Tensor; pass its buffer (in "
                        "te.extern's fcompute: ins[i] / outs[i], which are tir.Buffers)")
    if isinstance(a, bool):
        return IntImm("bool", int(a))
    try:
        e = convert(a)
    except TypeError:
        raise TypeError(f"call_packed: argument {k} of type {type(a).__name__} cannot be passed "
                        "(pass tir.Buffers, expressions, numbers or strings)") from None
    if not isinstance(e, PrimExpr):
        raise TypeError(f"call_packed: argument {k} of type {type(a).__name__} cannot be passed "
                        "(pass tir.Buffers, expressions, numbers or strings)")
    if isinstance(e, Var) and dt.is_handle(e.dtype):
        return e
    if dt.lanes_of(e.dtype) != 1:
        raise TypeError(f"call_packed: argument {k} is a vector ({e.dtype}); pass scalars")
    return e


def call_packed(*args: Any, dtype: str = "int32", span: Any = None) -> PrimExpr:
    """Call the global function ``args[0]`` (registered with ``tvm.register_func``) with
    ``args[1:]``, from generated code (TVM's ``tvm.tir.call_packed``). Buffers are passed as
    DLTensors: a registered Python function receives them as NDArrays sharing the memory."""
    if not args or not isinstance(args[0], (str, StringImm)):
        raise TypeError("call_packed: the first argument must be the function's name (a str), "
                        f"got {args[0] if args else 'nothing'!r}")
    name = args[0].value if isinstance(args[0], StringImm) else args[0]
    if not name:
        raise ValueError("call_packed: empty function name")
    dt.parse(dtype)
    if dt.lanes_of(dtype) != 1 or not (dt.is_integer(dtype) or dt.is_float(dtype)):
        raise TypeError(f"call_packed: the result dtype must be a scalar int or float, got {dtype}")
    return Call(dtype, "tvm_call_packed", [StringImm(name), *[_arg(k + 1, a)
                                                            for k, a in enumerate(args[1:])]])


def call_packed_lowered(*args: Any, dtype: str = "int32", span: Any = None) -> PrimExpr:
    """TVM's lowered form of :func:`call_packed`; tvmpy lowers in the code generators, so this
    is the same call."""
    return call_packed(*args, dtype=dtype, span=span)
