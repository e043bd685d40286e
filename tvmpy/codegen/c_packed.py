"""``tir.call_packed`` in the C backend (the LLVM backend's twin: codegen/llvm_packed.py).

A call is a statement block: the TVMValue array, type codes and DLTensors (with their shape
arrays) on the stack, then one call of the source's ``static`` helper ``tvmpy_call_packed``,
which looks the function up through ``__tvmpy_packed_lookup`` once per name (cached in a
``static`` slot of the source) and calls it. Its value is usable as a statement
(``Evaluate``), bound by a ``LetStmt`` or stored (``out[i] = call_packed(...)``); deeper inside
an expression it is refused with an error saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

import numpy as np

from ..ir import dtype as dt
from ..runtime.abi import ERROR_SYMBOL, LOOKUP_SYMBOL
from ..runtime.dlpack import dtype_to_dl
from ..tir import expr as E
from .c_expr import CCodegenError
from .c_prelude import c_string, storage_type

if TYPE_CHECKING:
    from .c_emit import FunctionEmitter

__all__ = ["emit_call_packed", "is_call_packed"]

_HELPER_KEY = "\0tvmpy_call_packed"
_HELPER = f"""typedef union {{ int64_t v_int64; double v_float64; void* v_handle; }} TVMPyValue;
typedef struct {{
  void* data; int32_t device_type, device_id, ndim; uint8_t code, bits; uint16_t lanes;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
}} TVMPyDLTensor;
typedef int32_t (*TVMPyPackedCFunc)(TVMPyValue*, int32_t*, int32_t, TVMPyValue*, int32_t*, void*);
/* the PackedFunc registry's lookup: set by the tvmpy runtime when it loads the library */
extern void* {LOOKUP_SYMBOL};
static int32_t tvmpy_call_packed(void** cache, const char* name, const char* missing,
                                 const char* removed, const char* failed, TVMPyValue* args,
                                 int32_t* codes, int32_t n, TVMPyValue* ret, int32_t* ret_code) {{
  void* slot = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (!slot) {{
    void* (*lookup)(const char*) = (void* (*)(const char*)){LOOKUP_SYMBOL};
    if (!lookup) {{
      __atomic_store_n(&{ERROR_SYMBOL}, "call_packed: this library was loaded without tvmpy's "
                       "runtime (no PackedFunc registry)", __ATOMIC_RELAXED);
      return -1;
    }}
    slot = lookup(name);
    if (!slot) {{ __atomic_store_n(&{ERROR_SYMBOL}, missing, __ATOMIC_RELAXED); return -1; }}
    __atomic_store_n(cache, slot, __ATOMIC_RELEASE);
  }}
  void** rec = __atomic_load_n((void***)slot, __ATOMIC_ACQUIRE);
  if (!rec) {{ __atomic_store_n(&{ERROR_SYMBOL}, removed, __ATOMIC_RELAXED); return -1; }}
  ret->v_int64 = 0;
  *ret_code = 4;
  if (((TVMPyPackedCFunc)rec[0])(args, codes, n, ret, ret_code, rec[1]) != 0) {{
    __atomic_store_n(&{ERROR_SYMBOL}, failed, __ATOMIC_RELAXED);
    return -1;
  }}
  return 0;
}}"""


def is_call_packed(e: object) -> TypeGuard[E.Call]:
    return isinstance(e, E.Call) and e.op == "tvm_call_packed"


def _slot(em: FunctionEmitter, name: str) -> str:
    em.externs.setdefault(_HELPER_KEY, _HELPER)
    key = "\0tvmpy_packed_slot:" + name
    decl = em.externs.get(key)
    if decl is None:
        k = sum(1 for x in em.externs if x.startswith("\0tvmpy_packed_slot:"))
        decl = em.externs[key] = f"static void* __tvmpy_packed_slot_{k} = 0;"
    return decl.split()[2]


def _dims(em: FunctionEmitter, shape: E.PrimExpr, base: str) -> str:
    dims = shape.args if isinstance(shape, E.Call) else ()
    name = em.new_name(base)
    vals = ", ".join(f"(int64_t)({em.expr(d)})" for d in dims) or "0"
    em.emit(f"int64_t {name}[{max(len(dims), 1)}] = {{{vals}}};")
    return name


def _make_array(em: FunctionEmitter, call: E.Call) -> str:
    data, shape, strides, ndim, ann, offset = call.args[:6]
    if not (isinstance(shape, E.Call) and shape.op == "tvm_stack_make_shape"):
        raise CCodegenError(f"tvm_stack_make_array: the shape must be tvm_stack_make_shape, got "
                            f"{shape}")
    elem = dt.element_of(ann.dtype)
    code, bits = dtype_to_dl(np.dtype(dt.to_numpy(elem)))
    shp = _dims(em, shape, "packed_shape")
    strd = (_dims(em, strides, "packed_strides")
            if isinstance(strides, E.Call) and strides.op == "tvm_stack_make_shape" else "NULL")
    off = "0" if isinstance(offset, E.IntImm) and offset.value == 0 else \
        f"(uint64_t)({em.expr(offset)}) * {dt.bytes_of(elem)}"
    t = em.new_name("packed_tensor")
    em.emit(f"TVMPyDLTensor {t} = {{(void*)({em.expr(data)}), 1, 0, {len(shape.args)}, {code}, "
            f"{bits}, 1, {shp}, {strd}, {off}}};")
    return t


def emit_call_packed(em: FunctionEmitter, call: E.Call, result: str | None) -> None:
    """Emit ``call`` as statements; ``result``: a declared C variable that receives its value."""
    name_e, args = call.args[0], call.args[1:]
    if not isinstance(name_e, E.StringImm):
        raise CCodegenError(f"tvm_call_packed: the first argument must be the function name, "
                            f"got {name_e}")
    name = name_e.value
    slot = _slot(em, name)
    em.open("")
    n = len(args)
    vals, codes = em.new_name("packed_args"), em.new_name("packed_codes")
    ret, ret_code = em.new_name("packed_ret"), em.new_name("packed_ret_code")
    em.emit(f"TVMPyValue {vals}[{max(n, 1)}]; int32_t {codes}[{max(n, 1)}];")
    em.emit(f"TVMPyValue {ret}; int32_t {ret_code};")
    for k, a in enumerate(args):
        if isinstance(a, E.Call) and a.op == "tvm_stack_make_array":
            em.emit(f"{vals}[{k}].v_handle = &{_make_array(em, a)}; {codes}[{k}] = 7;")
        elif isinstance(a, E.StringImm):
            em.emit(f"{vals}[{k}].v_handle = (void*){c_string(a.value)}; {codes}[{k}] = 11;")
        elif dt.lanes_of(a.dtype) != 1:
            raise CCodegenError(f"call_packed {name!r}: argument {k + 1} is a vector ({a.dtype})")
        elif dt.is_handle(a.dtype):
            em.emit(f"{vals}[{k}].v_handle = (void*)({em.expr(a)}); {codes}[{k}] = 3;")
        elif dt.is_float(a.dtype):
            em.emit(f"{vals}[{k}].v_float64 = (double)({em.expr(a)}); {codes}[{k}] = 2;")
        else:
            em.emit(f"{vals}[{k}].v_int64 = (int64_t)({em.expr(a)}); {codes}[{k}] = 0;")
    msgs = [c_string(f"call_packed {name!r}: {m}") for m in
            ("no such global function", "the function was unregistered")]
    msgs.append(c_string(f"call_packed {name!r} failed"))
    em.open(f"if (tvmpy_call_packed(&{slot}, {c_string(name)}, {', '.join(msgs)}, {vals}, "
            f"{codes}, {n}, &{ret}, &{ret_code}) != 0)")
    em.fail(None)
    em.close()
    if result is not None:
        ty = storage_type(call.dtype)
        em.emit(f"{result} = {ret_code} == 2 ? ({ty}){ret}.v_float64 : ({ty}){ret}.v_int64;")
    em.close()
