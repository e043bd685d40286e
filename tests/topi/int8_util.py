"""Shared inputs of the int8 kernel tests: full-range uint8 data / int8 weights with the extreme
values present (255 and -128 catch a saturating instruction), AutoTVM's fallback warning
silenced, and the targets.

Code built for another CPU is never run (issue 24: ``-mcpu=znver4`` code died of SIGILL on an
Intel Xeon): kernels run with :data:`HOST` (this machine) or :func:`isa_target` (this machine
with features taken away by ``-mattr``, never added), which pick the micro-kernel's instruction
set from this CPU's features; an instruction set this CPU lacks is only compiled and its IR
checked (:data:`IR_TARGETS`, named CPUs)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

RNG = np.random.default_rng(10)



def u8(*shape: int) -> np.ndarray:
    x = RNG.integers(0, 256, shape).astype("uint8")
    x.flat[0] = 255
    return x


def s8(*shape: int) -> np.ndarray:
    w = RNG.integers(-128, 128, shape).astype("int8")
    w.flat[0] = -128
    return w


#: this machine: the int8 kernels use the best instruction set its CPU has
HOST = "llvm"

#: the LLVM intrinsic each instruction set's micro-kernel calls (generic: none)
INTRINSIC = {"vnni": "llvm.x86.avx512.vpdpbusd.512", "avx512bw": "llvm.x86.avx512.pmaddw.d.512",
             "avx2": "llvm.x86.avx2.pmadd.wd", "generic": None}

#: CPUs whose int8 micro-kernel uses each instruction set: compiled and inspected, never run
IR_TARGETS = {"vnni": "llvm -mcpu=cascadelake", "avx512bw": "llvm -mcpu=skylake-avx512",
              "avx2": "llvm -mcpu=haswell", "generic": "llvm -mcpu=x86-64"}

# the feature an instruction set needs, and the -mattr that removes the better ones
_NEEDS = {"vnni": "avx512vnni", "avx512bw": "avx512bw", "avx2": "avx2", "generic": None}
_DROP = {"vnni": "", "avx512bw": "-avx512vnni", "avx2": "-avx512f", "generic": "-avx2"}


def host_isa() -> str:
    """The int8 instruction set of this machine's CPU."""
    from tvmpy.target import Target
    from tvmpy.topi.x86.int8_intrin import int8_isa

    return int8_isa(Target(HOST))


def isa_target(isa: str) -> str:
    """This machine's target with ``-mattr`` taking away the features above ``isa``, so that the
    int8 micro-kernel uses ``isa``; skips the test when this CPU lacks ``isa``."""
    from tvmpy.target import Target
    from tvmpy.topi.x86.int8_intrin import int8_isa

    need = _NEEDS[isa]
    if need is not None and not Target(HOST).has_feature(need):
        pytest.skip(f"this CPU has no {need} (the {isa} kernel is checked by its IR only)")
    target = HOST + (f" -mattr={_DROP[isa]}" if _DROP[isa] else "")
    assert int8_isa(Target(target)) == isa, target
    return target


def requant(y: Any, scale: float, zp: int, dtype: str = "uint8") -> Any:
    """The relay requantize chain QNN canonicalization emits (float scale, round half to even)."""
    from tvmpy import relay

    f = relay.round(relay.cast(y, "float32") * relay.const(scale, "float32"))
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    return relay.cast(relay.clip(f + relay.const(float(zp), "float32"), lo, hi), dtype)


def requant_np(y: np.ndarray, scale: float, zp: int, dtype: str = "uint8") -> np.ndarray:
    f = np.rint(y.astype(np.float32) * np.float32(scale)) + np.float32(zp)
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    return np.clip(f, lo, hi).astype(dtype)


def build(f: Any, target: str = HOST, opt_level: int = 3) -> Any:
    import tvmpy as tvm
    from tvmpy import relay

    with tvm.transform.PassContext(opt_level=opt_level):
        return relay.build(tvm.IRModule.from_expr(f), target=target)


def run(lib: Any, **inputs: np.ndarray) -> np.ndarray:
    import tvmpy as tvm
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return m.get_output(0).numpy()
