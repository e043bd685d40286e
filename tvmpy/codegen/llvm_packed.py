"""``tir.call_packed`` in the LLVM backend (see tir/packed.py and runtime/packed_func.py).

Per call site: the slot of the function (looked up through ``__tvmpy_packed_lookup`` the first
time, cached in an internal global of the module), the arguments as TVM's ``TVMValue`` array and
type codes on the stack (DLTensors and their shape arrays too; allocas live in the entry block),
then one indirect call of ``int32 fn(args, codes, n, &ret, &ret_code, resource)``. Every failure
stores a message starting with ``call_packed`` and returns -1 (the runtime appends what the
function reported)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ir import dtype as dt
from ..runtime.abi import LOOKUP_SYMBOL
from ..runtime.dlpack import dtype_to_dl
from ..tir import expr as E
from .llvm_ir import CodegenError, Value

if TYPE_CHECKING:
    from .llvm_codegen import CodeGenLLVM

__all__ = ["call_packed", "not_in_call"]

# TVM's DLTensor: data, device {type, id}, ndim, dtype {code, bits, lanes}, shape, strides,
# byte_offset (x86-64 / AArch64 layout: 48 bytes)
DLTENSOR = "{ ptr, i32, i32, i32, i8, i8, i16, ptr, ptr, i64 }"
CODE_INT, CODE_FLOAT, CODE_HANDLE, CODE_NULL, CODE_DLTENSOR, CODE_STR = 0, 2, 3, 4, 7, 11


def _cache_global(cg: CodeGenLLVM, name: str) -> str:
    caches: dict[str, str] | None = getattr(cg, "_packed_caches", None)
    if caches is None:
        caches = cg._packed_caches = {}  # type: ignore[attr-defined]
        cg.mb.globals.append(f"@{LOOKUP_SYMBOL} = external global ptr, align 8")
    ref = caches.get(name)
    if ref is None:
        ref = caches[name] = f"@__tvmpy_packed_slot.{len(caches)}"
        cg.mb.globals.append(f"{ref} = internal global ptr null, align 8")
    return ref


def _slot(cg: CodeGenLLVM, name: str) -> tuple[Value, Value]:
    """The function pointer and resource handle of ``name`` (looked up once per module)."""
    fb = cg.fb
    cache = _cache_global(cg, name)
    cached = fb.value("ptr", f"load atomic ptr, ptr {cache} acquire, align 8", "pslot")
    have = fb.value("i1", f"icmp ne ptr {cached.ref}, null", "phave")
    have_l, look_l = fb.label("packed_have"), fb.label("packed_lookup")
    fb.cond_br(have, have_l, look_l, f", !prof {cg._likely()}")
    fb.new_block(look_l)
    lookup = fb.value("ptr", f"load ptr, ptr @{LOOKUP_SYMBOL}, align 8", "plookup")
    ok = fb.value("i1", f"icmp ne ptr {lookup.ref}, null", "plk_ok")
    cg._check_or_fail(ok, f"call_packed {name!r}: this library was loaded without tvmpy's "
                          "runtime (no PackedFunc registry); load it with tvm.runtime.load_module")
    s = fb.value("ptr", f"call ptr {lookup.ref}(ptr {cg.mb.string(name).ref})", "pfound")
    ok = fb.value("i1", f"icmp ne ptr {s.ref}, null", "pfound_ok")
    cg._check_or_fail(ok, f"call_packed {name!r}: no such global function")
    fb.emit(f"store atomic ptr {s.ref}, ptr {cache} release, align 8")
    fb.br(have_l)
    fb.new_block(have_l)
    slot = fb.value("ptr", f"load atomic ptr, ptr {cache} acquire, align 8", "pslot")
    rec = fb.value("ptr", f"load atomic ptr, ptr {slot.ref} acquire, align 8", "prec")
    ok = fb.value("i1", f"icmp ne ptr {rec.ref}, null", "prec_ok")
    cg._check_or_fail(ok, f"call_packed {name!r}: the function was unregistered")
    fn = fb.value("ptr", f"load ptr, ptr {rec.ref}, align 8", "pfn")
    resp = fb.value("ptr", f"getelementptr inbounds {{ ptr, ptr }}, ptr {rec.ref}, i32 0, i32 1",
                    "pres_p")
    res = fb.value("ptr", f"load ptr, ptr {resp.ref}, align 8", "pres")
    return fn, res


def _i64(cg: CodeGenLLVM, e: E.PrimExpr) -> Value:
    v = cg.expr(e)
    return v if e.dtype == "int64" else cg.cast(v, e.dtype, "int64")


def _shape_array(cg: CodeGenLLVM, dims: tuple[E.PrimExpr, ...]) -> Value:
    fb = cg.fb
    arr = fb.alloca(f"[{max(len(dims), 1)} x i64]", 8, "pshape")
    for k, d in enumerate(dims):
        p = fb.value("ptr", f"getelementptr inbounds [{len(dims)} x i64], ptr {arr.ref}, i32 0, "
                            f"i32 {k}", "pdim")
        fb.emit(f"store {_i64(cg, d)}, ptr {p.ref}, align 8")
    return arr


def _make_array(cg: CodeGenLLVM, call: E.Call) -> Value:
    data, shape, strides, ndim, ann, offset = call.args[:6]
    fb = cg.fb
    if not (isinstance(shape, E.Call) and shape.op == "tvm_stack_make_shape"):
        raise CodegenError(f"tvm_stack_make_array: the shape must be tvm_stack_make_shape, got "
                           f"{shape}")
    code, bits = dtype_to_dl(np.dtype(dt.to_numpy(dt.element_of(ann.dtype))))
    t = fb.alloca(DLTENSOR, 8, "pdltensor")
    fields: list[str] = [f"ptr {cg.expr(data).ref}", "i32 1", "i32 0",
                         f"i32 {len(shape.args)}", f"i8 {code}", f"i8 {bits}", "i16 1",
                         f"ptr {_shape_array(cg, shape.args).ref}"]
    if isinstance(strides, E.Call) and strides.op == "tvm_stack_make_shape":
        fields.append(f"ptr {_shape_array(cg, strides.args).ref}")
    else:
        fields.append("ptr null")
    if isinstance(offset, E.IntImm) and offset.value == 0:
        fields.append("i64 0")
    else:
        off = _i64(cg, offset)
        nbytes = fb.value("i64", f"mul i64 {off.ref}, {dt.bytes_of(dt.element_of(ann.dtype))}",
                          "pboff")
        fields.append(str(nbytes))
    for k, f in enumerate(fields):
        p = fb.value("ptr", f"getelementptr inbounds {DLTENSOR}, ptr {t.ref}, i32 0, i32 {k}",
                     "pfield")
        fb.emit(f"store {f}, ptr {p.ref}")
    return t


def call_packed(cg: CodeGenLLVM, call: E.Call) -> Value:
    """``tvm_call_packed(name, args...)``: see the module docstring."""
    if cg.size_type != "i64":
        raise CodegenError("tir.call_packed needs a 64-bit CPU target (the PackedFunc registry "
                           "is reached through the tvmpy runtime; wasm32 has none)")
    name_e, args = call.args[0], call.args[1:]
    if not isinstance(name_e, E.StringImm):
        raise CodegenError(f"tvm_call_packed: the first argument must be the function name, got "
                           f"{name_e}")
    name = name_e.value
    fb = cg.fb
    n = len(args)
    vals = fb.alloca(f"[{max(n, 1)} x i64]", 8, "pargs")
    codes = fb.alloca(f"[{max(n, 1)} x i32]", 4, "pcodes")
    for k, a in enumerate(args):
        if isinstance(a, E.Call) and a.op == "tvm_stack_make_array":
            v, code = Value("ptr", _make_array(cg, a).ref), CODE_DLTENSOR
        elif isinstance(a, E.StringImm):
            v, code = cg.mb.string(a.value), CODE_STR
        elif dt.lanes_of(a.dtype) != 1:
            raise CodegenError(f"call_packed {name!r}: argument {k + 1} is a vector ({a.dtype})")
        elif dt.is_handle(a.dtype):
            v, code = cg.expr(a), CODE_HANDLE
        elif dt.is_float(a.dtype):
            v = cg.expr(a)
            v, code = (v if a.dtype == "float64" else cg.cast(v, a.dtype, "float64")), CODE_FLOAT
        elif dt.is_integer(a.dtype) or dt.element_of(a.dtype) == "bool":
            v, code = _i64(cg, a), CODE_INT
        else:
            raise CodegenError(f"call_packed {name!r}: argument {k + 1} of dtype {a.dtype} cannot "
                               "be passed")
        p = fb.value("ptr", f"getelementptr inbounds [{n} x i64], ptr {vals.ref}, i32 0, i32 {k}",
                     "parg")
        fb.emit(f"store {v}, ptr {p.ref}, align 8")
        p = fb.value("ptr", f"getelementptr inbounds [{n} x i32], ptr {codes.ref}, i32 0, i32 {k}",
                     "pcode")
        fb.emit(f"store i32 {code}, ptr {p.ref}, align 4")
    fn, res = _slot(cg, name)
    rv = fb.alloca("i64", 8, "pret")
    rc = fb.alloca("i32", 4, "pret_code")
    fb.emit(f"store i64 0, ptr {rv.ref}, align 8")
    fb.emit(f"store i32 {CODE_NULL}, ptr {rc.ref}, align 4")
    r = fb.value("i32", f"call i32 {fn.ref}(ptr {vals.ref}, ptr {codes.ref}, i32 {n}, "
                        f"ptr {rv.ref}, ptr {rc.ref}, ptr {res.ref})", "pcall")
    ok = fb.value("i1", f"icmp eq i32 {r.ref}, 0", "pcall_ok")
    cg._check_or_fail(ok, f"call_packed {name!r} failed")
    # the result, by its type code: an int or a double (TVM's TVMValue union)
    rcode = fb.value("i32", f"load i32, ptr {rc.ref}, align 4", "pret_c")
    is_f = fb.value("i1", f"icmp eq i32 {rcode.ref}, {CODE_FLOAT}", "pret_isf")
    iv = fb.value("i64", f"load i64, ptr {rv.ref}, align 8", "pret_i")
    fv = fb.value("double", f"load double, ptr {rv.ref}, align 8", "pret_f")
    if dt.is_float(call.dtype):
        conv = fb.value("double", f"sitofp i64 {iv.ref} to double", "pret_if")
        out = fb.value("double", f"select i1 {is_f.ref}, double {fv.ref}, double {conv.ref}",
                       "pret")
        return out if call.dtype == "float64" else cg.cast(out, "float64", call.dtype)
    conv = fb.value("i64", f"fptosi double {fv.ref} to i64", "pret_fi")
    out = fb.value("i64", f"select i1 {is_f.ref}, i64 {conv.ref}, i64 {iv.ref}", "pret")
    return out if call.dtype == "int64" else cg.cast(out, "int64", call.dtype)


def not_in_call(cg: CodeGenLLVM, call: E.Call) -> Value:
    raise CodegenError(f"{call.op} is only valid as an argument of tir.call_packed: {call}")
