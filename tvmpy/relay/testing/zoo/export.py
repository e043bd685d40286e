"""Zoo models into Relay: through ONNX (``torch.onnx.export``) and through ``torch.export``
(``relay.frontend.from_pytorch``), at fixed sizes or with symbolic batch / sequence dims;
compiled with ``relay.build`` (graph executor) or ``relay.vm.compile`` (the VM: models whose
outputs have data-dependent shapes); and the references (onnxruntime, eager torch).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import compare
from .spec import Spec

__all__ = ["to_onnx", "from_onnx", "from_torch", "eager", "build", "Compiled", "TOLERANCE",
           "assert_close"]

# tests/e2e/test_models.py's norm: max|got - want| <= RTOL * max|want| + ATOL over each output
TOLERANCE = (1e-4, 1e-5)


def _torch_args(spec: Spec, feeds: Mapping[str, np.ndarray]) -> tuple:
    import torch

    return tuple(torch.from_numpy(np.array(feeds[i.name])) for i in spec.inputs)


def eager(module: Any, spec: Spec, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The module's outputs on ``feeds`` in eager torch, flattened to numpy arrays."""
    import torch

    with torch.no_grad():
        out = module(*_torch_args(spec, feeds))
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.numpy() for o in outs]


def to_onnx(spec: Spec, dynamic: bool = False, module: Any = None, opset: int = 17) -> Any:
    """``torch.onnx.export`` (the TorchScript exporter, ``dynamo=False``) at the spec's default
    sizes; with ``dynamic`` its symbolic dims (``batch``, ``seq``) become ``dim_param``s."""
    import onnx
    import torch

    module = spec.module if module is None else module
    feeds = spec.feeds()
    n_out = len(eager(module, spec, feeds))
    out_names = ["output"] if n_out == 1 else [f"output{k}" for k in range(n_out)]
    axes = None
    if dynamic:
        axes = {i.name: {k: d for k, d in enumerate(i.shape) if isinstance(d, str)}
                for i in spec.inputs}
    f = io.BytesIO()
    # nn.MultiheadAttention's inference fast path (aten::_native_multi_head_attention) has no
    # ONNX form: export the composite ops it stands for
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            torch.onnx.export(module, _torch_args(spec, feeds), f,  # type: ignore[arg-type]
                              input_names=[i.name for i in spec.inputs], output_names=out_names,
                              dynamic_axes=axes, opset_version=opset, dynamo=False)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    return onnx.load_from_string(f.getvalue())


def from_onnx(model: Any, spec: Spec, dynamic: bool = False) -> tuple[Any, dict]:
    """Relay module and params; static: the spec's default sizes bound to the inputs."""
    shape = None
    if not dynamic:
        shape = {i.name: i.concrete(spec.dims) for i in spec.inputs}
    return compare.import_onnx(model, shape)


def from_torch(spec: Spec, module: Any = None, dynamic: bool = False) -> tuple[Any, dict]:
    """``relay.frontend.from_pytorch`` (torch.export) at the spec's default sizes; with
    ``dynamic`` the program is exported with its symbolic dims as ``torch.export.Dim``s."""
    import torch

    from ...frontend import from_pytorch

    module = spec.module if module is None else module
    if not dynamic:
        infos = [(i.name, (list(i.concrete(spec.dims)), i.dtype)) for i in spec.inputs]
        return from_pytorch(module, infos)
    dims = {d: torch.export.Dim(d, min=1, max=spec.limits.get(d, 4096))
            for d in spec.dynamic_dims}
    shapes = tuple({k: dims[d] for k, d in enumerate(i.shape) if isinstance(d, str)}
                   for i in spec.inputs)
    # export at a batch of 2: torch.export specializes a dimension of size 1
    feeds = spec.feeds(**{d: max(2, n) for d, n in spec.dims.items()})
    # nn.LSTM / nn.GRU: torch shapes them by unrolling over the sequence unless told not to
    from ...frontend.pytorch.rnn import symbolic_rnn_export

    with symbolic_rnn_export():
        ep = torch.export.export(module, _torch_args(spec, feeds), dynamic_shapes=shapes)
    # the spec's input names, its symbolic dims named as the spec names them
    return from_pytorch(ep, [(i.name, (list(i.shape), i.dtype)) for i in spec.inputs])


class Compiled:
    """A built model: ``run(feeds) -> [numpy outputs]`` on the graph executor, or on the VM
    with ``vm`` or when the graph executor cannot run the module (``relay.build_module.
    vm_reason``, the rule ``tvmpy compile`` and the ONNX backend use: the loops that from_onnx
    makes of a recurrence over a run-time number of steps, sizes decided by data)."""

    def __init__(self, mod: Any, params: Mapping[str, Any], vm: bool = False,
                 opt_level: int = 3):
        from .... import transform
        from ...build_module import needs_vm

        vm = vm or needs_vm(mod)
        self.vm = vm
        if vm:
            from ....runtime import cpu
            from ....runtime.vm import VirtualMachine
            from ... import vm as relay_vm

            with transform.PassContext(opt_level=opt_level):
                exe = relay_vm.compile(mod, "llvm", params=dict(params))
            self._vm = VirtualMachine(exe, cpu(0))
        else:
            lib, _ = compare.build(mod, params, opt_level=opt_level)
            self._run = compare.tvm_runner(lib)

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if not self.vm:
            return self._run(feeds)
        out = self._vm.invoke("main", **feeds)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return [o.numpy() for o in outs]


def build(mod: Any, params: Mapping[str, Any], vm: bool = False, opt_level: int = 3) -> Compiled:
    return Compiled(mod, params, vm=vm, opt_level=opt_level)


def assert_close(got: list[np.ndarray], want: list[np.ndarray], what: str,
                 tol: tuple[float, float] = TOLERANCE) -> None:
    """Every output has the reference's shape and dtype kind, and is within the norm."""
    rtol, atol = tol
    if len(got) != len(want):
        raise AssertionError(f"{what}: {len(got)} outputs, the reference has {len(want)}")
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            raise AssertionError(f"{what}: output {k} shape {g.shape}, want {w.shape}")
        if w.dtype.kind in "iub":
            if not np.array_equal(g, w):
                raise AssertionError(f"{what}: output {k} ({w.dtype}) differs in "
                                     f"{int((g != w).sum())} of {w.size} elements")
            continue
        if not np.isfinite(g).all():
            raise AssertionError(f"{what}: output {k} has non-finite values")
        err, rel = compare.errors(g, w)
        bound = rtol * float(np.abs(w).max() if w.size else 0.0) + atol
        if err > bound:
            raise AssertionError(f"{what}: output {k} max abs error {err:.3g} > {bound:.3g} "
                                 f"(relative {rel:.3g})")
