"""Conv2d / dense workloads on VTA as TVM's VTA tests and benchmarks write them: the packed
operator plus the quantized epilogue (``>> shift``, ``+ bias``, clip to [0, 127] by min/max,
cast to int8), built into a VTA module and run on the simulator, with the numpy reference of the
same integer arithmetic. Used by tests, the AutoTVM measure and bench/vta_*.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import autotvm, te, tir, topi
from ..environment import get_env

__all__ = ["Conv2DWorkload", "DenseWorkload", "conv2d_epilogue_tensors", "dense_epilogue_tensors",
           "build_conv2d", "build_dense", "conv2d_inputs", "conv2d_reference", "unpack_conv2d_out",
           "dense_inputs", "dense_reference", "run_module", "RESNET18_CONVS"]


@dataclass(frozen=True)
class Conv2DWorkload:
    """A conv2d layer in NCHW terms (channels rounded up to the VTA blocks when packed)."""

    batch: int
    height: int
    width: int
    in_filter: int
    out_filter: int
    hkernel: int
    wkernel: int
    hpad: int
    wpad: int
    hstride: int
    wstride: int

    def out_hw(self) -> tuple[int, int]:
        return ((self.height + 2 * self.hpad - self.hkernel) // self.hstride + 1,
                (self.width + 2 * self.wpad - self.wkernel) // self.wstride + 1)

    def macs(self) -> int:
        oh, ow = self.out_hw()
        return self.batch * oh * ow * self.out_filter * self.in_filter * self.hkernel * self.wkernel


@dataclass(frozen=True)
class DenseWorkload:
    batch: int
    in_dim: int
    out_dim: int


# ResNet-18's conv layers at 224x224 (TVM's vta/tests resnet_wkls; C1, the first layer, stays
# on the CPU as in the paper and is not listed)
RESNET18_CONVS = {
    "C2": Conv2DWorkload(1, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1),
    "C3": Conv2DWorkload(1, 56, 56, 64, 128, 3, 3, 1, 1, 2, 2),
    "C4": Conv2DWorkload(1, 56, 56, 64, 128, 1, 1, 0, 0, 2, 2),
    "C5": Conv2DWorkload(1, 28, 28, 128, 128, 3, 3, 1, 1, 1, 1),
    "C6": Conv2DWorkload(1, 28, 28, 128, 256, 3, 3, 1, 1, 2, 2),
    "C7": Conv2DWorkload(1, 28, 28, 128, 256, 1, 1, 0, 0, 2, 2),
    "C8": Conv2DWorkload(1, 14, 14, 256, 256, 3, 3, 1, 1, 1, 1),
    "C9": Conv2DWorkload(1, 14, 14, 256, 512, 3, 3, 1, 1, 2, 2),
    "C10": Conv2DWorkload(1, 14, 14, 256, 512, 1, 1, 0, 0, 2, 2),
    "C11": Conv2DWorkload(1, 7, 7, 512, 512, 3, 3, 1, 1, 1, 1),
}


def _blocks(n: int, b: int) -> int:
    return -(-n // b)


def conv2d_epilogue_tensors(wkl: Conv2DWorkload, shift: int = 8) -> tuple[Any, list]:
    """(output, [data, kernel, bias, output]) of the packed conv2d + epilogue; call inside the
    AutoTVM dispatch context whose config is wanted (a FallbackContext gives the defaults)."""
    from .vta_conv2d import conv2d_packed

    env = get_env()
    nb, cb = _blocks(wkl.batch, env.BATCH), _blocks(wkl.in_filter, env.BLOCK_IN)
    ob = _blocks(wkl.out_filter, env.BLOCK_OUT)
    data = te.placeholder((nb, cb, wkl.height, wkl.width, env.BATCH, env.BLOCK_IN), name="data",
                          dtype=env.inp_dtype)
    kernel = te.placeholder((ob, cb, wkl.hkernel, wkl.wkernel, env.BLOCK_OUT, env.BLOCK_IN),
                            name="kernel", dtype=env.wgt_dtype)
    bias = te.placeholder((nb, ob, 1, 1, env.BATCH, env.BLOCK_OUT), name="bias",
                          dtype=env.acc_dtype)
    res = conv2d_packed(data, kernel, (wkl.hstride, wkl.wstride), (wkl.hpad, wkl.wpad), (1, 1),
                        f"NCHW{env.BATCH}n{env.BLOCK_IN}c", env.acc_dtype)
    return _epilogue(env, res, bias, shift), [data, kernel, bias]


def _epilogue(env: Any, res: Any, bias: Any, shift: int) -> Any:
    res = topi.right_shift(res, shift)
    res = topi.add(res, bias)
    hi = (1 << (env.OUT_WIDTH - 1)) - 1
    res = te.compute(res.shape, lambda *i: te.min(res(*i), tir.const(hi, res.dtype)), name="clipA")
    res = te.compute(res.shape, lambda *i: te.max(res(*i), tir.const(0, res.dtype)), name="clipB")
    return topi.cast(res, env.out_dtype)


def dense_epilogue_tensors(wkl: DenseWorkload, shift: int = 8) -> tuple[Any, list]:
    from .vta_dense import dense_packed

    env = get_env()
    nb, cb = _blocks(wkl.batch, env.BATCH), _blocks(wkl.in_dim, env.BLOCK_IN)
    ob = _blocks(wkl.out_dim, env.BLOCK_OUT)
    data = te.placeholder((nb, cb, env.BATCH, env.BLOCK_IN), name="data", dtype=env.inp_dtype)
    weight = te.placeholder((ob, cb, env.BLOCK_OUT, env.BLOCK_IN), name="weight",
                            dtype=env.wgt_dtype)
    bias = te.placeholder((nb, ob, env.BATCH, env.BLOCK_OUT), name="bias", dtype=env.acc_dtype)
    res = dense_packed(data, weight, None, env.acc_dtype)
    return _epilogue(env, res, bias, shift), [data, weight, bias]


def build_conv2d(wkl: Conv2DWorkload, config: Any = None, shift: int = 8,
                 name: str = "conv2d") -> Any:
    """The VTA module of ``wkl`` under AutoTVM ``config`` (None: the default tiles)."""
    from .. import build
    from .vta_conv2d import schedule_conv2d_packed

    with _config_ctx(config):
        out, ins = conv2d_epilogue_tensors(wkl, shift)
        s = schedule_conv2d_packed([out])
    env = get_env()
    return build(s, [*ins, out], "ext_dev", env.target_host, name=name)


def build_dense(wkl: DenseWorkload, config: Any = None, shift: int = 8,
                name: str = "dense") -> Any:
    from .. import build
    from .vta_dense import schedule_dense_packed

    with _config_ctx(config):
        out, ins = dense_epilogue_tensors(wkl, shift)
        s = schedule_dense_packed([out])
    env = get_env()
    return build(s, [*ins, out], "ext_dev", env.target_host, name=name)


def _config_ctx(config: Any) -> Any:
    if config is None:
        from ...autotvm.space import FallbackConfigEntity

        config = FallbackConfigEntity()
    return autotvm.ApplyConfig(config)


def conv2d_inputs(wkl: Conv2DWorkload, seed: int = 0) -> dict[str, np.ndarray]:
    """Random NCHW int8 data, OIHW int8 kernel (channels padded with zeros to the blocks when
    packed) and an int32 bias, unpacked."""
    rng = np.random.default_rng(seed)
    return {
        "data": rng.integers(-128, 128, (wkl.batch, wkl.in_filter, wkl.height, wkl.width),
                             dtype=np.int64).astype(np.int8),
        "kernel": rng.integers(-128, 128, (wkl.out_filter, wkl.in_filter, wkl.hkernel,
                                           wkl.wkernel), dtype=np.int64).astype(np.int8),
        "bias": rng.integers(-64, 64, (wkl.out_filter,), dtype=np.int64).astype(np.int32),
    }


def _pad_to(a: np.ndarray, axis: int, n: int) -> np.ndarray:
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, n - a.shape[axis])
    return np.pad(a, widths)


def pack_conv2d_inputs(wkl: Conv2DWorkload, inp: dict[str, np.ndarray]) -> list[np.ndarray]:
    env = get_env()
    nb, cb = _blocks(wkl.batch, env.BATCH), _blocks(wkl.in_filter, env.BLOCK_IN)
    ob = _blocks(wkl.out_filter, env.BLOCK_OUT)
    d = _pad_to(_pad_to(inp["data"], 0, nb * env.BATCH), 1, cb * env.BLOCK_IN)
    d = d.reshape(nb, env.BATCH, cb, env.BLOCK_IN, wkl.height, wkl.width).transpose(0, 2, 4, 5, 1, 3)
    k = _pad_to(_pad_to(inp["kernel"], 0, ob * env.BLOCK_OUT), 1, cb * env.BLOCK_IN)
    k = k.reshape(ob, env.BLOCK_OUT, cb, env.BLOCK_IN, wkl.hkernel, wkl.wkernel)
    k = k.transpose(0, 2, 4, 5, 1, 3)
    b = _pad_to(inp["bias"], 0, ob * env.BLOCK_OUT).reshape(1, ob, 1, 1, 1, env.BLOCK_OUT)
    b = np.broadcast_to(b, (nb, ob, 1, 1, env.BATCH, env.BLOCK_OUT))
    return [np.ascontiguousarray(x) for x in (d, k, b)]


def unpack_conv2d_out(wkl: Conv2DWorkload, out: np.ndarray) -> np.ndarray:
    nb, ob, oh, ow, bt, bo = out.shape
    full = out.transpose(0, 4, 1, 5, 2, 3).reshape(nb * bt, ob * bo, oh, ow)
    return full[: wkl.batch, : wkl.out_filter]


def conv2d_reference(wkl: Conv2DWorkload, inp: dict[str, np.ndarray], shift: int = 8,
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(int32 convolution, int8 epilogue result) in numpy, NCHW."""
    d = inp["data"].astype(np.int64)
    k = inp["kernel"].astype(np.int64)
    dp = np.pad(d, ((0, 0), (0, 0), (wkl.hpad, wkl.hpad), (wkl.wpad, wkl.wpad)))
    oh, ow = wkl.out_hw()
    acc = np.zeros((wkl.batch, wkl.out_filter, oh, ow), np.int64)
    for i in range(wkl.hkernel):
        for j in range(wkl.wkernel):
            win = dp[:, :, i: i + wkl.hstride * (oh - 1) + 1: wkl.hstride,
                     j: j + wkl.wstride * (ow - 1) + 1: wkl.wstride]
            acc += np.einsum("nchw,oc->nohw", win, k[:, :, i, j])
    acc32 = acc.astype(np.int32)
    out = (acc32 >> shift) + inp["bias"].reshape(1, -1, 1, 1)
    return acc32, np.clip(out, 0, 127).astype(np.int8)


def dense_inputs(wkl: DenseWorkload, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"data": rng.integers(-128, 128, (wkl.batch, wkl.in_dim), dtype=np.int64).astype(np.int8),
            "weight": rng.integers(-128, 128, (wkl.out_dim, wkl.in_dim),
                                   dtype=np.int64).astype(np.int8),
            "bias": rng.integers(-64, 64, (wkl.out_dim,), dtype=np.int64).astype(np.int32)}


def pack_dense_inputs(wkl: DenseWorkload, inp: dict[str, np.ndarray]) -> list[np.ndarray]:
    env = get_env()
    nb, cb = _blocks(wkl.batch, env.BATCH), _blocks(wkl.in_dim, env.BLOCK_IN)
    ob = _blocks(wkl.out_dim, env.BLOCK_OUT)
    d = _pad_to(_pad_to(inp["data"], 0, nb * env.BATCH), 1, cb * env.BLOCK_IN)
    d = d.reshape(nb, env.BATCH, cb, env.BLOCK_IN).transpose(0, 2, 1, 3)
    w = _pad_to(_pad_to(inp["weight"], 0, ob * env.BLOCK_OUT), 1, cb * env.BLOCK_IN)
    w = w.reshape(ob, env.BLOCK_OUT, cb, env.BLOCK_IN).transpose(0, 2, 1, 3)
    b = _pad_to(inp["bias"], 0, ob * env.BLOCK_OUT).reshape(1, ob, 1, env.BLOCK_OUT)
    b = np.broadcast_to(b, (nb, ob, env.BATCH, env.BLOCK_OUT))
    return [np.ascontiguousarray(x) for x in (d, w, b)]


def dense_reference(wkl: DenseWorkload, inp: dict[str, np.ndarray], shift: int = 8
                    ) -> tuple[np.ndarray, np.ndarray]:
    acc = (inp["data"].astype(np.int64) @ inp["weight"].astype(np.int64).T).astype(np.int32)
    out = (acc >> shift) + inp["bias"].reshape(1, -1)
    return acc, np.clip(out, 0, 127).astype(np.int8)


def unpack_dense_out(wkl: DenseWorkload, out: np.ndarray) -> np.ndarray:
    nb, ob, bt, bo = out.shape
    return out.transpose(0, 2, 1, 3).reshape(nb * bt, ob * bo)[: wkl.batch, : wkl.out_dim]


def run_module(f: Any, packed: list[np.ndarray], out_shape: tuple,
               wait_cycles: int = 1_000_000_000) -> tuple[np.ndarray, dict]:
    """Run VTA module ``f`` on the packed inputs; (packed int8 output, simulator stats)."""
    from .. import simulator

    out = np.zeros(out_shape, np.int8)
    simulator.clear_stats()
    f(*packed, out, wait_cycles=wait_cycles)
    return out, dict(simulator.stats())


def conv2d_config(wkl: Conv2DWorkload, **override: int) -> Any:
    """The default (untuned) tiles of ``wkl`` as a ConfigEntity, knobs overridable by name
    (``h``, ``w``, ``co``, ``ci``, ``oc_nthread``, ``h_nthread``; sizes in blocks/rows)."""
    from ...autotvm.space import ConfigEntity, OtherOptionEntity, SplitEntity
    from .common import default_tiles

    env = get_env()
    oh, ow = wkl.out_hw()
    hp = wkl.height + 2 * wkl.hpad
    t = default_tiles(env, b=_blocks(wkl.batch, env.BATCH), co=_blocks(wkl.out_filter, env.BLOCK_OUT),
                      oh=oh, ow=ow, ci=_blocks(wkl.in_filter, env.BLOCK_IN), kh=wkl.hkernel,
                      kw=wkl.wkernel, stride=max(1, (hp - wkl.hkernel) // (oh - 1)) if oh > 1 else 1)
    t.update(override)
    m: dict[str, Any] = {"tile_b": SplitEntity([-1, 1])}
    for k in ("h", "w", "ci", "co"):
        m[f"tile_{k}"] = SplitEntity([-1, t[k]])
    m["oc_nthread"] = OtherOptionEntity(t["oc_nthread"])
    m["h_nthread"] = OtherOptionEntity(t["h_nthread"])
    return ConfigEntity(-1, None, m)
