"""1-D and 3-D convolution and pooling (``nn.conv1d``/``nn.conv3d``, ``nn.max_pool1d``/``3d``,
``nn.avg_pool1d``/``3d``) in channel-first layouts (NCW, NCDHW; kernels OIW, OIDHW), sharing one
N-d type relation. Padding is per spatial axis: ``before`` values then ``after`` values."""

from __future__ import annotations

from typing import Any

from ..expr import RelayExpr
from ..ty import TensorType, Type, as_dim, dim_equal
from ._rel import fail, shape_str, tensor_arg
from .registry import REQUIRED, OpPattern, make_call, register_float16_accumulation, register_op

__all__ = ["conv1d", "conv3d", "max_pool1d", "avg_pool1d", "max_pool3d", "avg_pool3d"]

_LAYOUTS = {1: ("NCW", "OIW"), 3: ("NCDHW", "OIDHW")}


def _tuple(v: Any, n: int, what: str) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise ValueError(f"{what} must have 1 or {n} values, got {v}")
    return v


def _padding(v: Any, n: int) -> tuple[int, ...]:
    """int, one value per axis, or (before..., after...)."""
    if isinstance(v, int):
        return (v,) * (2 * n)
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return v * (2 * n)
    if len(v) == n:
        return v + v
    if len(v) == 2 * n:
        return v
    raise ValueError(f"padding must have 1, {n} or {2 * n} values, got {v}")


def _out(size: Any, k: int, pad: int, s: int, d: int, ceil_mode: bool = False,
         pad_begin: int = 0) -> Any:
    eff = (k - 1) * d + 1
    num = size + pad - eff
    if isinstance(num, int) and num < 0:
        fail(f"window {k} (dilation {d}) is larger than the padded input {size + pad}")
    if not ceil_mode:
        return as_dim(num // s + 1)
    out = (num + s - 1) // s + 1
    if isinstance(out, int) and isinstance(size, int) and (out - 1) * s >= size + pad_begin:
        out -= 1  # the last window must start inside the input (as topi, ONNX, PyTorch)
    return as_dim(out)


def _spatial(n: int, d: TensorType, kernel: tuple[int, ...], attrs: Any, ceil: bool) -> list[Any]:
    pads = attrs.padding
    return [_out(d.shape[2 + i], kernel[i], pads[i] + pads[n + i], attrs.strides[i],
                 attrs.dilation[i], ceil, pads[i]) for i in range(n)]


def _conv_rel(n: int):
    def rel(arg_types: list[Type], attrs: Any) -> Type:
        d = tensor_arg(arg_types[0], "the data")
        w = tensor_arg(arg_types[1], "the weight")
        dl, kl = _LAYOUTS[n]
        if attrs.data_layout != dl or attrs.kernel_layout != kl:
            fail(f"conv{n}d supports {dl} data and {kl} kernels, got {attrs.data_layout}/"
                 f"{attrs.kernel_layout}")
        if len(d.shape) != n + 2 or len(w.shape) != n + 2:
            fail(f"conv{n}d needs {n + 2}-D data and weight, got {shape_str(d.shape)} and "
                 f"{shape_str(w.shape)}")
        g = attrs.groups
        if not dim_equal(as_dim(w.shape[1] * g), d.shape[1]):
            fail(f"conv{n}d: data has {d.shape[1]} input channels but weight {shape_str(w.shape)} "
                 f"with groups={g} expects {as_dim(w.shape[1] * g)}")
        if isinstance(w.shape[0], int) and w.shape[0] % g:
            fail(f"conv{n}d: {w.shape[0]} output channels are not divisible by groups={g}")
        kernel = tuple(w.shape[2:])
        if not all(isinstance(k, int) for k in kernel):
            fail(f"conv{n}d: kernel size must be static, got weight {shape_str(w.shape)}")
        out = [d.shape[0], w.shape[0], *_spatial(n, d, kernel, attrs, False)]
        return TensorType(out, attrs.out_dtype or d.dtype)

    return rel


def _pool_rel(n: int):
    def rel(arg_types: list[Type], attrs: Any) -> Type:
        d = tensor_arg(arg_types[0], "the data")
        if len(d.shape) != n + 2 or attrs.layout != _LAYOUTS[n][0]:
            fail(f"pool{n}d needs {n + 2}-D {_LAYOUTS[n][0]} data, got {shape_str(d.shape)} "
                 f"({attrs.layout})")
        out = [d.shape[0], d.shape[1], *_spatial(n, d, attrs.pool_size, attrs, attrs.ceil_mode)]
        return TensorType(out, d.dtype)

    return rel


for _n in (1, 3):
    _dl, _kl = _LAYOUTS[_n]
    register_op(f"nn.conv{_n}d", _conv_rel(_n), OpPattern.OUT_ELEMWISE_FUSABLE, 2, {
        "strides": (1,) * _n, "padding": (0,) * (2 * _n), "dilation": (1,) * _n, "groups": 1,
        "channels": None, "kernel_size": None, "data_layout": _dl, "kernel_layout": _kl,
        "out_layout": "", "out_dtype": ""})  # fmt: skip
    register_float16_accumulation(f"nn.conv{_n}d")
    _pool = {"pool_size": REQUIRED, "strides": (1,) * _n, "padding": (0,) * (2 * _n),
             "dilation": (1,) * _n, "layout": _dl, "ceil_mode": False}
    register_op(f"nn.max_pool{_n}d", _pool_rel(_n), OpPattern.OUT_ELEMWISE_FUSABLE, 1, _pool)
    register_op(f"nn.avg_pool{_n}d", _pool_rel(_n), OpPattern.OUT_ELEMWISE_FUSABLE, 1,
                {**_pool, "count_include_pad": False})


def _conv(n: int, data: RelayExpr, weight: RelayExpr, strides: Any, padding: Any, dilation: Any,
          groups: int, channels: Any, kernel_size: Any, data_layout: str, kernel_layout: str,
          out_dtype: str) -> RelayExpr:
    return make_call(f"nn.conv{n}d", [data, weight], {
        "strides": _tuple(strides, n, "strides"), "padding": _padding(padding, n),
        "dilation": _tuple(dilation, n, "dilation"), "groups": int(groups),
        "channels": None if channels is None else int(channels),
        "kernel_size": None if kernel_size is None else _tuple(kernel_size, n, "kernel_size"),
        "data_layout": data_layout or _LAYOUTS[n][0], "kernel_layout": kernel_layout or _LAYOUTS[n][1],
        "out_layout": "", "out_dtype": out_dtype,
    })  # fmt: skip


def conv1d(data: RelayExpr, weight: RelayExpr, strides: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1, channels: int | None = None,
           kernel_size: Any = None, data_layout: str = "NCW", kernel_layout: str = "OIW",
           out_dtype: str = "") -> RelayExpr:
    return _conv(1, data, weight, strides, padding, dilation, groups, channels, kernel_size,
                 data_layout, kernel_layout, out_dtype)


def conv3d(data: RelayExpr, weight: RelayExpr, strides: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1, channels: int | None = None,
           kernel_size: Any = None, data_layout: str = "NCDHW", kernel_layout: str = "OIDHW",
           out_dtype: str = "") -> RelayExpr:
    return _conv(3, data, weight, strides, padding, dilation, groups, channels, kernel_size,
                 data_layout, kernel_layout, out_dtype)


def _pool_call(kind: str, n: int, data: RelayExpr, pool_size: Any, strides: Any, dilation: Any,
               padding: Any, layout: str, ceil_mode: bool, extra: dict) -> RelayExpr:
    return make_call(f"nn.{kind}_pool{n}d", [data], {
        "pool_size": _tuple(pool_size, n, "pool_size"), "strides": _tuple(strides, n, "strides"),
        "dilation": _tuple(dilation, n, "dilation"), "padding": _padding(padding, n),
        "layout": layout or _LAYOUTS[n][0], "ceil_mode": bool(ceil_mode), **extra})  # fmt: skip


def max_pool1d(data: RelayExpr, pool_size: Any = 1, strides: Any = 1, dilation: Any = 1,
               padding: Any = 0, layout: str = "NCW", ceil_mode: bool = False) -> RelayExpr:
    return _pool_call("max", 1, data, pool_size, strides, dilation, padding, layout, ceil_mode, {})


def max_pool3d(data: RelayExpr, pool_size: Any = 1, strides: Any = 1, dilation: Any = 1,
               padding: Any = 0, layout: str = "NCDHW", ceil_mode: bool = False) -> RelayExpr:
    return _pool_call("max", 3, data, pool_size, strides, dilation, padding, layout, ceil_mode, {})


def avg_pool1d(data: RelayExpr, pool_size: Any = 1, strides: Any = 1, dilation: Any = 1,
               padding: Any = 0, layout: str = "NCW", ceil_mode: bool = False,
               count_include_pad: bool = False) -> RelayExpr:
    return _pool_call("avg", 1, data, pool_size, strides, dilation, padding, layout, ceil_mode,
                      {"count_include_pad": bool(count_include_pad)})


def avg_pool3d(data: RelayExpr, pool_size: Any = 1, strides: Any = 1, dilation: Any = 1,
               padding: Any = 0, layout: str = "NCDHW", ceil_mode: bool = False,
               count_include_pad: bool = False) -> RelayExpr:
    return _pool_call("avg", 3, data, pool_size, strides, dilation, padding, layout, ceil_mode,
                      {"count_include_pad": bool(count_include_pad)})
