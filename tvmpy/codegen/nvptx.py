"""Target "nvptx": device PrimFuncs -> LLVM IR -> PTX with LLVM's NVPTX back end (llvmlite), then
ptxas -> cubins; host PrimFuncs -> the same launch plan as target "cuda". The runtime module is
the CUDA one (``runtime/cuda_module.py``): ``get_source()`` is the LLVM IR, ``get_source("ptx")``
the PTX.

The LLVM CPU code generator (:class:`~tvmpy.codegen.llvm_codegen.CodeGenLLVM`) emits the
statements and expressions; this subclass changes what is GPU-specific:

- kernels are ``define ptx_kernel void @name(ptr noalias %A, ..., i32 %n)`` (generic pointers);
- ``thread_extent`` binds the variable to ``llvm.nvvm.read.ptx.sreg.{ctaid,tid}.{x,y,z}``;
- ``shared`` allocations are ``addrspace(3)`` module globals (cast to generic pointers),
  ``local`` ones stack arrays; ``tvm_storage_sync`` is ``llvm.nvvm.barrier0``;
- float math the NVPTX back end cannot select (``llvm.exp``, ``llvm.tanh``, libm ``erff`` ...)
  calls libdevice (``__nv_expf`` ...): the nvidia-cuda-nvcc wheel's ``libdevice.10.bc`` is linked
  in, everything but the kernels internalized, and the module optimized at O3 before PTX is
  emitted (NVVMReflect resolves libdevice's ``__nvvm_reflect`` queries).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
from typing import Any

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.function import PrimFunc
from . import abi
from .gpu_source import GPUCodegenError, launch_plan, warp_refusal
from .llvm_codegen import _MD_NO_UNROLL, CodeGenLLVM
from .llvm_intrinsics import _EXACT, LIBM_UNARY, LLVM_BINARY, LLVM_UNARY, _float_math_typed
from .llvm_ir import CodegenError, FunctionBuilder, Value, llvm_type

__all__ = ["build", "nvptx_module", "find_libdevice"]

TRIPLE = "nvptx64-nvidia-cuda"
_SHFL = {"tvm_warp_shuffle": ("idx", True), "tvm_warp_shuffle_down": ("down", True),
         "tvm_warp_shuffle_up": ("up", False)}
_MATH = {*LLVM_UNARY, *LLVM_BINARY, *LIBM_UNARY, "rsqrt", "sigmoid", "fmod"}
_UNROLL_MAX = 16  # constant trip counts up to this are unrolled fully
_SREG = {"blockIdx": "ctaid", "threadIdx": "tid"}
# LLVM math intrinsics / libm names -> libdevice (float64 name; float32 appends "f")
_LIBDEVICE = {"exp": "exp", "exp2": "exp2", "exp10": "exp10", "log": "log", "log2": "log2",
              "log10": "log10", "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh",
              "cosh": "cosh", "asin": "asin", "acos": "acos", "atan": "atan", "tanh": "tanh",
              "pow": "pow", "atan2": "atan2"}
_LIBM = {"erf": "erf", "log1p": "log1p"}


def find_libdevice() -> str:
    """Path of libdevice.10.bc (the nvidia-cuda-nvcc-cu12 wheel, or ``TVMPY_LIBDEVICE``)."""
    env = os.environ.get("TVMPY_LIBDEVICE")
    if env:
        return env
    spec = importlib.util.find_spec("nvidia")
    for root in (list(spec.submodule_search_locations or []) if spec else []):
        hits = sorted(glob.glob(os.path.join(root, "cuda_nvcc", "nvvm", "libdevice", "*.bc")))
        if hits:
            return hits[-1]
    for p in ("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc",):
        if os.path.exists(p):
            return p
    raise GPUCodegenError("nvptx: libdevice.10.bc not found (pip install nvidia-cuda-nvcc-cu12, "
                          "or set TVMPY_LIBDEVICE); it provides expf, tanhf, erff ... on the GPU")


class CodeGenNVPTX(CodeGenLLVM):
    """LLVM IR of CUDA kernels (see the module docstring)."""

    def __init__(self, datalayout: str, arch: str):
        super().__init__(TRIPLE, datalayout, arch, "", module_name="tvmpy_nvptx")
        # kernels cannot report errors through the runtime's error string
        self.mb.globals = [g for g in self.mb.globals if abi.ERROR_SYMBOL not in g]
        self.threads = False
        self._shared_count = 0

    def add_kernel(self, func: PrimFunc) -> None:
        self._func_name = func.name
        self._check_symbol(func.name)
        params, bindings = [], []
        for k, v in enumerate(func.params):
            name = f"p{k}_" + re.sub(r"[^A-Za-z0-9_]", "_", v.name)
            if dt.is_handle(v.dtype):
                params.append(("ptr", "noalias", f"%{name}"))
            else:
                if v.dtype == "bool":
                    raise GPUCodegenError(f"{func.name}: bool scalar parameter {v.name}")
                params.append((llvm_type(v.dtype), "", f"%{name}"))
            bindings.append((v, Value(params[-1][0], f"%{name}")))
        fb = FunctionBuilder(func.name, "void", params, self.fn_attrs, linkage="ptx_kernel")
        self.mb.functions.append(fb)
        from .llvm_codegen import _FnCtx

        self.ctx = _FnCtx(fb)
        for v, val in bindings:
            self.ctx.syms[id(v)] = val
            buf = func.buffer_map.get(v)
            if val.ty == "ptr":
                self.ctx.noalias.add(id(v))
                if buf is not None:
                    self.ctx.syms[id(buf.data)] = val
                    self.ctx.noalias.add(id(buf.data))
        self.stmt(func.body)
        if not fb.terminated:
            fb.terminate("ret void")

    def serial_loop(self, var: E.Var, min_e: Any, extent_e: Any, body: S.Stmt,
                    unroll: bool = False) -> None:
        # as nvcc does: small constant loops unroll fully, so register tiles (local arrays
        # indexed by the loop variables) become registers instead of stack memory
        small = isinstance(extent_e, E.IntImm) and extent_e.value <= _UNROLL_MAX
        super().serial_loop(var, min_e, extent_e, body, unroll=unroll or small)

    def _loop_md(self, prop: str) -> str:
        if prop == _MD_NO_UNROLL:  # the CPU generator's choice; GPUs want unrolled loops
            prop = '!"llvm.loop.mustprogress"'
        return super()._loop_md(prop)

    def _check_or_fail(self, ok: Value, msg: str | None) -> None:
        raise GPUCodegenError(f"{self._func_name}: a CUDA kernel cannot report failures ({msg}); "
                              "check the condition on the host")

    def _s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key != "thread_extent":
            if s.attr_key == "virtual_thread":
                raise GPUCodegenError(f"{self._func_name}: a virtual_thread attribute reached "
                                      "codegen; InjectVirtualThread must run first (tvm.lower)")
            super()._s_AttrStmt(s)
            return
        iv = s.node
        tag = getattr(iv, "thread_tag", "")
        kind, _, axis = tag.partition(".")
        if kind not in _SREG or axis not in ("x", "y", "z"):
            raise GPUCodegenError(f"{self._func_name}: unknown thread axis {tag!r}")
        var = iv.var
        if id(var) in self.ctx.syms:  # the same tag again (UnifyThreadBinding): already bound
            self.stmt(s.body)
            return
        fn = f"llvm.nvvm.read.ptx.sreg.{_SREG[kind]}.{axis}"
        self.mb.declare(fn, "i32", [])
        v = self.fb.value("i32", f"call i32 @{fn}()", f"{kind}_{axis}")
        if var.dtype != "int32":
            v = self.cast(v, "int32", var.dtype)
        with self._bind(var, v, None):
            self.stmt(s.body)

    def _s_Evaluate(self, s: S.Evaluate) -> None:
        c = s.value
        if isinstance(c, E.Call) and c.op in ("tir.tvm_storage_sync", "tvm_storage_sync"):
            self.mb.declare("llvm.nvvm.barrier0", "void", [])
            self.fb.emit("call void @llvm.nvvm.barrier0()")
            return
        super()._s_Evaluate(s)

    def _e_Call(self, e: E.Call) -> Value:
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        if op == "tvm_warp_activemask":
            self.mb.declare("llvm.nvvm.activemask", "i32", [])
            return self.fb.value("i32", "call i32 @llvm.nvvm.activemask()", "activemask")
        if op in _MATH and dt.lanes_of(e.dtype) > 1:
            return self._lanewise_math(e)
        if op not in _SHFL:
            return super()._e_Call(e)
        # TVM's form (mask, value, lane/offset, width, warp_size) -> llvm.nvvm.shfl.sync.*:
        # the clamp operand packs the segment mask ((32 - width) << 8) and the lane limit
        if len(e.args) != 5 or dt.lanes_of(e.dtype) != 1:
            raise GPUCodegenError(f"{self._func_name}: {e.op} takes (mask, value, lane, width, "
                                  f"warp_size) on a scalar, got {e}")
        mode, limit = _SHFL[op]
        elem = dt.element_of(e.dtype)
        kind = {"float32": "f32", "int32": "i32", "uint32": "i32"}.get(elem)
        if kind is None:
            raise GPUCodegenError(f"{self._func_name}: {e.op} of {elem}; nvptx shuffles "
                                  "float32/int32")
        vals = []
        for a in (e.args[0], e.args[2], e.args[3]):
            v = self.expr(a)
            vals.append(self.cast(v, a.dtype, "int32") if a.dtype != "int32" else v)
        mask, idx, width = vals
        value = self.expr(e.args[1])
        fb = self.fb
        seg = fb.value("i32", f"sub i32 32, {width.ref}", "seg")
        clamp = fb.value("i32", f"shl i32 {seg.ref}, 8", "clamp")
        if limit:
            clamp = fb.value("i32", f"or i32 {clamp.ref}, 31", "clamp")
        fn = f"llvm.nvvm.shfl.sync.{mode}.{kind}"
        ty = "float" if kind == "f32" else "i32"
        self.mb.declare(fn, ty, ["i32", ty, "i32", "i32"])
        return fb.value(ty, f"call {ty} @{fn}(i32 {mask.ref}, {ty} {value.ref}, i32 {idx.ref}, "
                            f"i32 {clamp.ref})", "shfl")

    def _lanewise_math(self, e: E.Call) -> Value:
        """Vector float math, one lane at a time (the scalar calls then go to libdevice)."""
        fb, lanes, elem = self.fb, dt.lanes_of(e.dtype), dt.element_of(e.dtype)
        compute = "float32" if elem == "float16" and e.op not in _EXACT else elem
        vecs = [self.expr(a) for a in e.args]
        out = Value(llvm_type(e.dtype), "undef")
        for i in range(lanes):
            xs = []
            for v, a in zip(vecs, e.args):
                a_elem = dt.element_of(a.dtype)
                x = fb.value(llvm_type(a_elem), f"extractelement {v}, i32 {i}", "lane")
                xs.append(self.cast(x, a_elem, compute) if a_elem != compute else x)
            r = _float_math_typed(self, e.op, xs, compute)
            if compute != elem:
                r = self.cast(r, compute, elem)
            out = fb.value(out.ty, f"insertelement {out}, {r}, i32 {i}", "vec")
        return out

    def _s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        scope = buf.scope or "global"
        if not scope.startswith("shared"):
            if scope == "warp":
                raise GPUCodegenError(warp_refusal(self._func_name, buf.name))
            if scope not in ("local", "global"):
                raise GPUCodegenError(f"{self._func_name}: storage scope {scope!r} of "
                                      f"{buf.name} is not supported by nvptx")
            super()._s_Allocate(s)
            return
        count = 1
        for d in buf.shape:
            if not isinstance(d, E.IntImm):
                raise GPUCodegenError(f"{self._func_name}: shared allocation {buf.name} has a "
                                      f"symbolic size {buf.shape}; kernels need constant sizes")
            count *= d.value
        self._shared_count += 1
        name = f"{self._func_name}.{re.sub(r'[^A-Za-z0-9_]', '_', buf.name)}.{self._shared_count}"
        ety = llvm_type(buf.dtype, memory=True)
        self.mb.globals.append(f'@"{name}" = internal addrspace(3) global '
                               f"[{max(count, 1)} x {ety}] undef, align 16")
        ptr = self.fb.value("ptr", f'addrspacecast ptr addrspace(3) @"{name}" to ptr', "shared")
        with self._bind_buffer(buf.data, ptr):
            self.stmt(s.body)


def _use_libdevice(ir: str) -> tuple[str, bool]:
    """Rewrite the math calls NVPTX cannot select to libdevice's ``__nv_*`` functions."""
    used = False

    def llvm_sub(m: re.Match) -> str:
        nonlocal used
        used = True
        return f"@__nv_{_LIBDEVICE[m.group(1)]}{'f' if m.group(2) == '32' else ''}"

    ir = re.sub(r"@llvm\.(" + "|".join(_LIBDEVICE) + r")\.f(32|64)\b", llvm_sub, ir)

    def libm_sub(m: re.Match) -> str:
        nonlocal used
        used = True
        return f"@__nv_{m.group(1)}{m.group(2)}"

    ir = re.sub(r"@(" + "|".join(_LIBM) + r")(f?)\b(?=\()", libm_sub, ir)
    bad = re.search(r"@llvm\.(" + "|".join(_LIBDEVICE) + r")\.v\d+", ir)
    if bad:
        raise GPUCodegenError(f"nvptx: vector math {bad.group(0)} in a kernel; keep math scalar")
    return ir, used


def _refuse_wmma(kernel: PrimFunc) -> None:
    """Tensor cores (wmma fragments and calls) are generated by target "cuda" only."""
    from ..tir.functor import post_order_visit
    from .cuda_wmma import WMMA_OPS, is_fragment_scope

    found: list[str] = []

    def visit(n: Any) -> None:
        if isinstance(n, S.Allocate) and is_fragment_scope(n.buffer.scope):
            found.append(f"buffer {n.buffer.name} of scope {n.buffer.scope}")
        elif isinstance(n, E.Call) and n.op.removeprefix("tir.") in WMMA_OPS:
            found.append(n.op.removeprefix("tir."))

    post_order_visit(kernel.body, visit)
    if found:
        raise GPUCodegenError(f"nvptx: kernel {kernel.name} uses tensor cores ({found[0]}); the "
                           "LLVM NVPTX back end here has no wmma: build it for target 'cuda' "
                           "(NVRTC)")


def nvptx_module(kernels: list[PrimFunc], arch: str) -> tuple[str, bytes]:
    """(LLVM IR, PTX) of ``kernels`` for ``arch`` (sm_XX)."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    for k in kernels:
        _refuse_wmma(k)
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, opt=3)
    cg = CodeGenNVPTX(str(tm.target_data), arch)
    for k in kernels:
        cg.add_kernel(k)
    ir, libdevice = _use_libdevice(cg.text())
    try:
        mod = llvm.parse_assembly(ir)
        mod.verify()
    except RuntimeError as err:
        raise CodegenError(f"nvptx: invalid LLVM IR generated: {err}\n{ir}") from None
    if libdevice:
        with open(find_libdevice(), "rb") as f:
            lib = llvm.parse_bitcode(f.read())
        lib.triple, lib.data_layout = mod.triple, mod.data_layout
        mod.link_in(lib)
    names = {k.name for k in kernels}
    for fn in mod.functions:
        if not fn.is_declaration and fn.name not in names:
            fn.linkage = "internal"
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return ir, tm.emit_assembly(mod).encode()


def build(funcs: Any, target: Any = None, entry: str | None = None) -> Any:
    """A runtime CUDA module for host + device PrimFuncs: kernels through LLVM's NVPTX back end
    to PTX (for the target's ``-arch``, else sm_80) and ptxas cubins (that arch, else sm_80 and
    sm_90), host functions as launch plans. (No fast-math option: libdevice's precise math.)"""
    from ..contrib import nvcc
    from ..runtime.gpu_module import GPUHostModule
    from .cuda import _arches
    from .opencl import split_functions

    hosts, kernels = split_functions(funcs)
    arches = sorted(_arches(target), key=lambda a: int(a.removeprefix("sm_").rstrip("af")))
    ir, ptx = nvptx_module(kernels, arches[0])
    cubins, info = {}, {}
    for arch in arches:
        cubins[arch], info[arch] = nvcc.ptxas(ptx, arch)
    plan = launch_plan(hosts, kernels)
    mod = GPUHostModule.create("cuda", ir, plan, entry or hosts[0].name,
                               binaries={"ptx": ptx, **cubins})
    mod.imported_modules[0].ptxas_info = info
    return mod
