"""Tensor cores in CUDA C: buffers of storage scope ``wmma.matrix_a`` / ``wmma.matrix_b`` /
``wmma.accumulator`` and TVM's four wmma intrinsics (``topi/cuda/tensor_intrin.py`` declares
them for tensorize).

The intrinsics, with TVM's arguments (``buf``: a fragment buffer's data var; ``index``: which
fragment of that buffer, one per ``m x k`` / ``k x n`` / ``m x n`` tile)::

    tvm_fill_fragment(buf, m, n, k, index, value)
    tvm_load_matrix_sync(buf, m, n, k, index, ptr, stride, layout)   layout: "row_major"|"col_major"
    tvm_mma_sync(d, d_index, a, a_index, b, b_index, c, c_index)      D = A.B + C
    tvm_store_matrix_sync(buf, m, n, k, index, ptr, stride, layout)

Code: each fragment buffer is declared as an array of ``nvcuda::wmma::fragment<use, m, n, k, T
(, layout)>`` (``size / (rows * cols)`` fragments; shape and layout inferred from the calls that
use the buffer, TVM's InferFragment), and the calls become ``nvcuda::wmma::load_matrix_sync(A[i],
ptr, stride)`` etc. NVRTC ships no ``mma.h`` (nor the ``cuda_fp16.h`` it includes), so the
``nvcuda::wmma`` names the kernels use are defined here, only when a kernel uses them, on the
compiler built-ins mma.h itself is written on (``__hmma_m16n16k16_ld_a`` ...; PTX ``wmma.*``,
sm_70+ for float16, sm_80+ for bfloat16). Compiled for the host (tests), the same source runs
on the emulation of ``tvmpy/testing/cuda_fake.py``: a fragment holds its whole tile in every
thread of the warp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir.functor import post_order_visit

__all__ = ["WMMA_OPS", "FragmentInfo", "infer_fragments", "wmma_prelude", "WMMAError",
           "SHAPES", "is_fragment_scope"]

WMMA_OPS = ("tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_mma_sync", "tvm_store_matrix_sync")
SHAPES = ((16, 16, 16), (32, 8, 16), (8, 32, 16))
_USES = {"wmma.matrix_a": "matrix_a", "wmma.matrix_b": "matrix_b",
         "wmma.accumulator": "accumulator"}


class WMMAError(ValueError):
    """A wmma fragment or call that CUDA's tensor cores cannot take."""


@dataclass
class FragmentInfo:
    use: str  # matrix_a | matrix_b | accumulator
    m: int
    n: int
    k: int
    elem: str  # float16 | bfloat16 | float32
    layout: str | None = None  # row_major | col_major (matrix_a / matrix_b)

    @property
    def tile(self) -> int:
        """Elements per fragment: ``m*k`` (a), ``k*n`` (b), ``m*n`` (accumulator)."""
        return {"matrix_a": self.m * self.k, "matrix_b": self.k * self.n,
                "accumulator": self.m * self.n}[self.use]

    def ctype(self) -> str:
        t = {"float16": "_Float16", "bfloat16": "tvmpy_bf16_tag", "float32": "float"}[self.elem]
        lay = f", nvcuda::wmma::{self.layout}" if self.use != "accumulator" else ""
        return (f"nvcuda::wmma::fragment<nvcuda::wmma::{self.use}, {self.m}, {self.n}, {self.k}, "
                f"{t}{lay}>")

    def key(self) -> tuple:
        return (self.use, self.m, self.n, self.k, self.elem, self.layout)


def is_fragment_scope(scope: str | None) -> bool:
    return bool(scope) and str(scope).startswith("wmma.")


def _op(e: E.Call) -> str:
    return e.op[4:] if e.op.startswith("tir.") else e.op


def _int(e: Any, what: str) -> int:
    v = E.const_value(e) if isinstance(e, E.PrimExpr) else e
    if not isinstance(v, int):
        raise WMMAError(f"{what} must be a constant integer, got {e}")
    return v


def _str(e: Any) -> str:
    return e.value if isinstance(e, E.StringImm) else str(e)


def infer_fragments(body: Any, allocs: dict[int, Any]) -> dict[int, FragmentInfo]:
    """{id(data var): FragmentInfo} of the fragment buffers ``allocs`` (id(data) -> Buffer) from
    the wmma calls in ``body``."""
    shapes: dict[int, tuple[int, int, int]] = {}
    layouts: dict[int, str] = {}
    problems: list[str] = []

    def note(var: Any, m: Any, n: Any, k: Any, what: str) -> None:
        if not isinstance(var, E.Var) or id(var) not in allocs:
            problems.append(f"{what}: {var} is not a buffer of a wmma.* scope allocated in the kernel")
            return
        shp = (_int(m, f"{what} m"), _int(n, f"{what} n"), _int(k, f"{what} k"))
        old = shapes.setdefault(id(var), shp)
        if old != shp:
            problems.append(f"{allocs[id(var)].name} is used as {old} and as {shp} fragments")

    def visit(n: Any) -> None:
        if not isinstance(n, E.Call):
            return
        op = _op(n)
        if op not in WMMA_OPS:
            return
        a = n.args
        if op == "tvm_mma_sync":
            if len(a) != 8:
                problems.append(f"tvm_mma_sync takes 8 arguments, got {len(a)}")
            return
        want = 6 if op == "tvm_fill_fragment" else 8
        if len(a) != want:
            problems.append(f"{op} takes {want} arguments, got {len(a)}")
            return
        note(a[0], a[1], a[2], a[3], op)
        if op == "tvm_load_matrix_sync" and isinstance(a[0], E.Var):
            lay = _str(a[7])
            if lay not in ("row_major", "col_major"):
                problems.append(f"{op}: layout must be row_major or col_major, got {lay!r}")
            elif layouts.setdefault(id(a[0]), lay) != lay:
                problems.append(f"{allocs[id(a[0])].name} is loaded as row- and column-major")

    post_order_visit(body, visit)
    if problems:
        raise WMMAError("; ".join(dict.fromkeys(problems)))
    out: dict[int, FragmentInfo] = {}
    for key, buf in allocs.items():
        use = _USES.get(buf.scope)
        if use is None:
            raise WMMAError(f"storage scope {buf.scope!r} of {buf.name}: expected one of "
                            f"{', '.join(_USES)}")
        shp = shapes.get(key)
        if shp is None:
            raise WMMAError(f"fragment {buf.name} ({buf.scope}) is never filled, loaded or "
                            "stored by a wmma call, so its shape is unknown")
        if shp not in SHAPES:
            raise WMMAError(f"fragment {buf.name}: shape m{shp[0]}n{shp[1]}k{shp[2]}; tensor cores "
                            f"take {', '.join(f'm{a}n{b}k{c}' for a, b, c in SHAPES)}")
        elem = dt.element_of(buf.dtype)
        if elem == "uint16" and use != "accumulator":
            # bfloat16 after LegalizeStorageDtypes (its bits as uint16; wmma has no 16-bit
            # integer fragments, so this is the only meaning)
            elem = "bfloat16"
        ok = ("float16", "bfloat16") if use != "accumulator" else ("float16", "float32")
        if elem not in ok:
            raise WMMAError(f"fragment {buf.name} ({buf.scope}) of {elem}: expected "
                            f"{' or '.join(ok)}")
        layout = layouts.get(key) if use != "accumulator" else None
        if use != "accumulator" and layout is None:
            raise WMMAError(f"fragment {buf.name} ({buf.scope}) is never loaded "
                            "(tvm_load_matrix_sync gives its layout)")
        info = FragmentInfo(use, *shp, elem, layout)
        size = _int(buf.shape[0], f"size of {buf.name}") * dt.lanes_of(buf.dtype)
        if size % info.tile:
            raise WMMAError(f"fragment buffer {buf.name} has {size} elements, not a multiple of "
                            f"the {info.tile} of one {use} fragment")
        out[key] = info
    return out


# ---- the device definitions (on NVRTC's built-ins) -------------------------------------------
_HEAD = """\
namespace nvcuda { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment;
}}  /* namespace nvcuda::wmma */
struct tvmpy_bf16_tag;"""


def _regs(info: FragmentInfo) -> tuple[str, int]:
    """(C element type of the fragment's registers, count)."""
    shape = (info.m, info.n, info.k)
    if info.use == "accumulator":
        return ("float", 8) if info.elem == "float32" else ("int", 4)
    if info.elem == "float16":
        return "int", 8
    a, b = {(16, 16, 16): (4, 4), (32, 8, 16): (8, 2), (8, 32, 16): (2, 8)}[shape]
    return "int", a if info.use == "matrix_a" else b


def _shape(info: FragmentInfo) -> str:
    return f"m{info.m}n{info.n}k{info.k}"


def _device_defs(frags: list[FragmentInfo], mmas: list[tuple[FragmentInfo, ...]]) -> list[str]:
    out = []
    ns = "nvcuda::wmma::"
    for f in frags:
        t, n = _regs(f)
        ct = f.ctype()
        decl = ct.replace("nvcuda::wmma::fragment<", "fragment<").replace(ns, "")
        out.append(f"namespace nvcuda {{ namespace wmma {{\ntemplate <> struct {decl} {{ {t} x[{n}]; }};")
        pre = f"__hmma_{_shape(f)}" if f.elem != "bfloat16" else f"__mma_bf16_{_shape(f)}"
        if f.use == "accumulator":
            suf = "f32" if f.elem == "float32" else "f16"
            et = "float" if f.elem == "float32" else "int"
            out.append(
                f"static __device__ inline void fill_fragment({decl}& f, float v) {{\n"
                + ("  for (int i = 0; i < 8; ++i) f.x[i] = v;\n" if f.elem == "float32" else
                   "  unsigned short h = ((_Float16)v).x;\n"
                   "  for (int i = 0; i < 4; ++i) f.x[i] = (int)(h | ((unsigned)h << 16));\n")
                + "}\n"
                f"static __device__ inline void load_matrix_sync({decl}& f, const void* p, "
                f"unsigned ldm, layout_t l) {{\n"
                f"  if (l == mem_row_major) {pre}_ld_c_{suf}(f.x, (const {et}*)p, ldm, 0);\n"
                f"  else {pre}_ld_c_{suf}(f.x, (const {et}*)p, ldm, 1);\n}}\n"
                f"static __device__ inline void store_matrix_sync(void* p, const {decl}& f, "
                f"unsigned ldm, layout_t l) {{\n"
                f"  if (l == mem_row_major) {pre}_st_c_{suf}(({et}*)p, ({et}*)f.x, ldm, 0);\n"
                f"  else {pre}_st_c_{suf}(({et}*)p, ({et}*)f.x, ldm, 1);\n}}")
        else:
            ab = "a" if f.use == "matrix_a" else "b"
            lay = 0 if f.layout == "row_major" else 1
            out.append(f"static __device__ inline void load_matrix_sync({decl}& f, const void* p, "
                       f"unsigned ldm) {{\n  {pre}_ld_{ab}(f.x, (const int*)p, ldm, {lay});\n}}")
        out.append("}}  /* namespace nvcuda::wmma */")
    for d, a, b, c in mmas:
        args = ", ".join(f"{'const ' if i else ''}"
                         f"{x.ctype().replace('nvcuda::wmma::fragment<', 'fragment<').replace(ns, '')}"
                         f"& {nm}" for i, (x, nm) in enumerate(((d, "d"), (a, "a"), (b, "b"),
                                                                 (c, "c"))))
        code = (2 if a.layout == "col_major" else 0) + (1 if b.layout == "col_major" else 0)
        if a.elem == "bfloat16":
            fn = f"__mma_bf16_{_shape(a)}_mma_f32"
        else:
            fn = f"__hmma_{_shape(a)}_mma_{'f32' if d.elem == 'float32' else 'f16'}" \
                 f"{'f32' if c.elem == 'float32' else 'f16'}"
        dt_ = "float" if d.elem == "float32" else "int"
        ct_ = "float" if c.elem == "float32" else "int"
        out.append(f"namespace nvcuda {{ namespace wmma {{\n"
                   f"static __device__ inline void mma_sync({args}) {{\n"
                   f"  {fn}(({dt_}*)d.x, (const int*)a.x, (const int*)b.x, (const {ct_}*)c.x, "
                   f"{code}, 0);\n}}\n}}}}  /* namespace nvcuda::wmma */")
    return out


def wmma_prelude(frags: list[FragmentInfo], mmas: list[tuple[FragmentInfo, ...]]) -> str:
    """The ``nvcuda::wmma`` definitions the kernels use (device: NVRTC built-ins; host: the
    emulation's generic templates, HOST_HEADER of tvmpy/testing/cuda_fake.py)."""
    uniq = list({f.key(): f for f in frags}.values())
    umma = list({tuple(x.key() for x in m): m for m in mmas}.values())
    body = "\n".join(_device_defs(uniq, umma))
    return (f"/* tensor cores (NVRTC has no mma.h: its nvcuda::wmma on the compiler built-ins) */\n"
            f"#ifdef __CUDA_ARCH__\n{_HEAD}\n{body}\n#endif")
