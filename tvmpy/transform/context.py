"""``PassContext``: the options passes run under (TVM's ``tvm.transform.PassContext``).

``with tvm.transform.PassContext(opt_level=3, required_pass=[...], disabled_pass=[...],
config={...}, instruments=[...]):`` around ``relay.build`` / ``tvm.lower`` / ``tvm.build`` /
``Sequential(...)(mod)``. The active contexts form a stack per thread (``threading.local``):
two threads compiling with different options do not see each other's context.

Config keys (validated: an unknown key is an error), with the layer that reads them:

- ``tir.add_lower_pass``: ``[(phase, pass), ...]`` custom loop-IR passes placed in the tir
  pipeline (:mod:`tvmpy.tir.pipeline` documents the phases);
- ``tir.LoopPartition.max_growth``: LoopPartition's budget, the most statements the partitioned
  function may hold as a multiple of the original's (default 8; ``None``: unbounded; see
  :mod:`tvmpy.tir.transform.loop_partition`);
- ``relay.FuseOps.max_depth``: the most operators in one fused group;
- ``relay.x86.winograd``: ``"auto"`` / ``True`` / ``False`` / a tile size, the x86 conv2d
  Winograd choice.
- ``relay.cuda.winograd``: ``"auto"`` (default) / ``True`` / ``False``, the GPU conv2d Winograd
  choice (``relay/op/strategy/gpu.py``).
- ``relay.gpu.symbolic_batch_hint``: an int >= 1 (default 1), the batch whose grid the GPU
  convolution tiles are chosen for when the batch is a run-time size
  (``relay/op/strategy/gpu.py``).
- ``relay.cuda.winograd_pre_transform``: ``True`` (default) / ``False``, whether the GPU
  AlterOpLayout rewrites a Winograd conv2d into the weight transform (folded at build time for
  a constant weight) + ``nn.contrib_conv2d_winograd_without_weight_transform``
  (``relay/op/strategy/gpu_alter_op.py``); False: the transform runs inside the operator.
- ``relay.x86.pointwise_matmul``: ``True`` (default) / ``False``, whether the x86 layout pass
  turns a 1x1 convolution of an NCHW input into a matmul (``relay/op/strategy/x86_alter_op.py``).
- ``relay.x86.conv_nchw_input``: ``True`` (default) / ``False``, whether an x86 direct NCHWc
  convolution reads an input that arrives in NCHW in place (else through a layout_transform;
  rows narrower than 8 columns always go through it).
- ``relay.x86.pad_channels``: ``True`` (default) / ``False``, whether relay.build pads the
  half-vector channel counts of conv chains to whole vectors on CPU targets
  (``relay/transform/pad_channels.py``).
- ``relay.ConvTransposeToConv.shared_padding``: ``False`` (default) / ``True``, whether the
  phase convolutions of a lowered ``nn.conv2d_transpose`` each pad the input themselves, or
  read same-size windows of the input padded once (``nn.pad`` + ``strided_slice``: one compiled
  convolution per layer; ``relay/transform/conv_transpose.py``).
- ``cuda.fast_math``: compile CUDA kernels with NVRTC's ``-use_fast_math`` (codegen/cuda.py).
- ``cuda.async_copy``: 16-byte global -> shared copies as ``cp.async`` (sm_80+, completed
  before each barrier; codegen/cuda.py). Off by default.
- ``relay.backend.strict_schedules``: a fused group whose anchor schedule raises is an error
  (``ScheduleError``) instead of a warning and the slow fallback schedule; unset, the
  environment variable ``TVMPY_STRICT_SCHEDULES=1`` turns it on (relay/backend/te_compiler.py).

- ``relay.FakeQuantizationToInteger.optional_qnn_ops``: the optional rewrites of the QDQ pass
  relay.build runs (relay/build_module.py ``qnn_passes``); default ``["nn.softmax"]``
  (onnxruntime's QLinearSoftmax for a quantized softmax, as its default graph optimizations
  do); ``[]`` keeps the softmax in float between its dequantize and quantize.

``instruments``: pass instruments (``tvm.ir.instrument.PassInstrument`` / ``@pass_instrument``
classes, or any object with some of their methods ``enter_pass_ctx()``, ``exit_pass_ctx()``,
``should_run(mod, info)``, ``run_before_pass(mod, info)``, ``run_after_pass(mod, info)``); they
see every pass call made inside the context. As TVM: entering calls each ``enter_pass_ctx`` in
order and, if one raises, exits the ones already entered (last first), drops the context's
instruments and re-raises (the context is not entered); leaving calls each ``exit_pass_ctx``
and, if one raises, drops the instruments and re-raises (the rest are not called).
``override_instruments(new)`` exits the current instruments and enters the new ones, the same
way (on the context it is called on: ``PassContext.current()`` outside any ``with`` is the
thread's default context, so its instruments then see every pass of the thread).
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["PassContext", "KNOWN_CONFIG"]

KNOWN_CONFIG: dict[str, str] = {
    "tir.add_lower_pass": "list of (phase, pass) pairs, phase 0..3",
    "relay.FuseOps.max_depth": "int > 0",
    "relay.x86.winograd": "'auto', True, False or a tile size",
    "relay.cuda.winograd": "'auto', True or False: GPU conv2d Winograd (conv2d_nchw_winograd.cuda)",
    "relay.gpu.symbolic_batch_hint": "int >= 1: the batch a GPU conv's tiles are chosen for "
                                     "when the batch is a run-time size (default 1)",
    "relay.cuda.winograd_pre_transform": "bool: GPU Winograd weights transformed at build time "
                                         "(AlterOpLayout; default True)",
    "relay.x86.pointwise_matmul": "bool: x86 1x1 convolutions of NCHW inputs as a matmul",
    "relay.x86.conv_nchw_input": "bool: x86 NCHWc convolutions read NCHW inputs in place",
    "relay.x86.pad_channels": "bool: half-vector channel counts of conv chains padded to "
                              "whole vectors (CPU targets)",
    "relay.ConvTransposeToConv.shared_padding": "bool: a transposed convolution's phases read "
                                                "windows of one padded input (default False)",
    "cuda.fast_math": "bool: CUDA kernels compiled with NVRTC's -use_fast_math (__expf ...)",
    "cuda.async_copy": "bool: 16-byte global -> shared copies as cp.async (sm_80+)",
    "relay.backend.strict_schedules": "bool: a failing operator schedule is an error, not a "
                                      "warning and the fallback schedule",
    "relay.FakeQuantizationToInteger.optional_qnn_ops": "list of op names, default "
                                                        "['nn.softmax']",
    "relay.backend.use_auto_scheduler": "bool: fused functions take the best record of the "
                                        "current auto_scheduler.ApplyHistoryBest",
    "tir.LoopPartition.max_growth": "number > 0 or None: LoopPartition's statement budget, a "
                                    "multiple of the function's size (None: unbounded)",
}


class _Stack(threading.local):
    def __init__(self) -> None:
        self.contexts: list[PassContext] = []
        self.default: PassContext | None = None  # what current() gives outside any `with`


_STACK = _Stack()
_LOG = logging.getLogger("tvmpy.transform")
_METHODS = ("enter_pass_ctx", "exit_pass_ctx", "should_run", "run_before_pass",
            "run_after_pass")


def _check_instruments(instruments: Sequence[Any] | None) -> list[Any]:
    if instruments is None:
        return []
    if not isinstance(instruments, (list, tuple)):
        raise TypeError(f"PassContext: instruments must be a list or tuple of pass instruments, "
                        f"got {type(instruments).__name__}")
    for inst in instruments:
        if inspect.isclass(inst):
            raise TypeError(f"PassContext: instruments takes instances; got the class "
                            f"{inst.__name__} (write {inst.__name__}())")
        if not any(callable(getattr(inst, m, None)) for m in _METHODS):
            raise TypeError(f"PassContext: {inst!r} is not a pass instrument (it has none of "
                            f"{', '.join(_METHODS)})")
    return list(instruments)


class PassContext:
    """Options for the passes run inside ``with PassContext(...):``."""

    def __init__(self, opt_level: int = 2, required_pass: Sequence[str] | None = None,
                 disabled_pass: Sequence[str] | None = None,
                 instruments: Sequence[Any] | None = None, config: dict | None = None):
        self.opt_level = int(opt_level)
        self.required_pass = list(required_pass or [])
        self.disabled_pass = list(disabled_pass or [])
        self.instruments = _check_instruments(instruments)
        self.config = dict(config or {})
        for key in self.config:
            if key not in KNOWN_CONFIG:
                raise ValueError(f"PassContext: unsupported config {key!r}; supported: "
                                 f"{', '.join(KNOWN_CONFIG)}")

    def pass_enabled(self, name: str, opt_level: int) -> bool:
        """TVM's rule: disabled wins, then required, then ``opt_level >= the pass's``."""
        if name in self.disabled_pass:
            return False
        return name in self.required_pass or self.opt_level >= opt_level

    @staticmethod
    def current() -> PassContext:
        """The innermost active context of this thread (a default one outside any ``with``)."""
        if _STACK.contexts:
            return _STACK.contexts[-1]
        if _STACK.default is None:
            _STACK.default = PassContext()
        return _STACK.default

    @staticmethod
    def list_configs() -> dict[str, str]:
        """The known config keys and what each takes."""
        return dict(KNOWN_CONFIG)

    def override_instruments(self, instruments: Sequence[Any] | None) -> None:
        """Replace this context's instruments: the current ones' ``exit_pass_ctx``, then the
        new ones' ``enter_pass_ctx`` (``None`` or ``[]``: no instruments)."""
        new = _check_instruments(instruments)
        self._exit_instruments()
        self.instruments = new
        self._enter_instruments()

    def _enter_instruments(self) -> None:
        entered: list[Any] = []
        try:
            for inst in self.instruments:
                if hasattr(inst, "enter_pass_ctx"):
                    inst.enter_pass_ctx()
                entered.append(inst)
        except BaseException:
            self.instruments = []
            for inst in reversed(entered):
                if hasattr(inst, "exit_pass_ctx"):
                    try:
                        inst.exit_pass_ctx()
                    except Exception as err:  # the enter error is the one to report
                        _LOG.warning("%s.exit_pass_ctx raised %r while unwinding a failed "
                                     "enter_pass_ctx", type(inst).__name__, err)
            raise

    def _exit_instruments(self) -> None:
        try:
            for inst in self.instruments:
                if hasattr(inst, "exit_pass_ctx"):
                    inst.exit_pass_ctx()
        except BaseException:
            self.instruments = []
            raise

    def __enter__(self) -> PassContext:
        self._enter_instruments()
        _STACK.contexts.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _STACK.contexts.pop()
        self._exit_instruments()
