"""The helpers of TVM's ``tvm.testing`` that tutorials and test files call.

- checks: ``assert_allclose``, ``check_numerical_grads``;
- targets: ``enabled_targets()``, ``device_enabled(target)``: the targets a test may run on,
  from ``TVM_TEST_TARGETS`` (``;``-separated target strings) or :data:`DEFAULT_TEST_TARGETS`,
  keeping those this installation compiles for (``tvm.runtime.enabled``) AND whose device exists
  (``tvm.device(kind).exist``). Here that is llvm always, opencl when an OpenCL driver (PoCL)
  is installed, cuda / nvptx only with an NVIDIA GPU: NVRTC compiles CUDA C without a GPU, but
  a target counts as enabled only where its code runs, as in TVM;
- marks: ``requires_llvm`` / ``requires_cuda`` / ``requires_gpu`` / ... and ``uses_gpu``, usable
  as ``@requires_cuda`` or ``requires_cuda()`` (the list of marks);
- parametrization: ``parametrize_targets``, ``exclude_targets``, ``known_failing_targets``,
  ``parameter``, ``parameters``, ``fixture``. ``parametrize_targets("llvm", ...)`` works alone;
  the automatic ``target`` / ``dev`` fixtures and the expansion of the others come from the
  pytest plugin :mod:`tvmpy.testing.plugin`, which a ``conftest.py`` loads with
  ``pytest_plugins = ["tvmpy.testing.plugin"]``;
- ``main()``: ``if __name__ == "__main__": tvm.testing.main()`` runs the calling file's tests.

pytest is imported only by the functions that make marks or fixtures, so ``assert_allclose``
works in a script without it.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import os
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "assert_allclose", "check_numerical_grads", "assert_prim_expr_equal", "DEFAULT_TEST_TARGETS", "enabled_targets",
    "device_enabled", "uses_gpu", "requires_gpu", "requires_cuda", "requires_nvptx",
    "requires_opencl", "requires_vulkan", "requires_llvm", "requires_rpc", "requires_package", "parametrize_targets",
    "exclude_targets", "known_failing_targets", "parameter", "parameters", "fixture", "main",
]

#: Targets tried when ``TVM_TEST_TARGETS`` is unset (TVM's list, less the kinds tvmpy has no
#: code generator for; ``enabled_targets`` keeps the runnable ones).
DEFAULT_TEST_TARGETS = ["llvm", "cuda", "nvptx", "opencl"]

# kinds of GPU devices (tvm.device names) that requires_gpu looks for
_GPU_DEVICES = ("cuda", "rocm", "opencl", "metal", "vulkan")


# ---- checks ------------------------------------------------------------------------------------
def _as_numpy(x: Any) -> np.ndarray:
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else np.asarray(x)


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``np.testing.assert_allclose`` with TVM's defaults (rtol = atol = 1e-7) that also accepts
    NDArrays and checks the shapes first (no broadcasting). Not symmetric: the tolerance is
    ``atol + rtol * abs(desired)``."""
    a, d = _as_numpy(actual), _as_numpy(desired)
    np.testing.assert_equal(np.shape(a), np.shape(d))
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)


def check_numerical_grads(function: Callable[..., Any],
                          input_values: Mapping[str, np.ndarray] | Sequence[np.ndarray],
                          grad_values: Mapping[str, np.ndarray] | Sequence[np.ndarray],
                          function_value: float | None = None, delta: float = 1e-3,
                          atol: float = 1e-2, rtol: float = 0.1) -> None:
    """Check gradients ``grad_values`` of the scalar ``function`` at ``input_values`` against
    finite differences (TVM's signature). Inputs and gradients are both lists (positional
    arguments) or both dicts (keyword arguments). Each partial derivative starts as a forward
    difference and is refined (central, then five-point) where it disagrees; the test fails when
    ``|numerical - analytical|_2 > atol * sqrt(n) + rtol * |numerical|_2`` for an input."""
    if isinstance(input_values, Mapping) != isinstance(grad_values, Mapping):
        raise TypeError("input_values and grad_values must both be dicts or both be lists")
    if isinstance(input_values, Mapping):
        inputs = {k: np.asarray(v) for k, v in input_values.items()}
        grads = {k: np.asarray(v) for k, v in grad_values.items()}  # type: ignore[union-attr]

        def call(values: dict[str, np.ndarray]) -> float:
            return float(function(**values))
    else:
        inputs = {str(i): np.asarray(v) for i, v in enumerate(input_values)}
        grads = {str(i): np.asarray(v) for i, v in enumerate(grad_values)}
        order = list(inputs)

        def call(values: dict[str, np.ndarray]) -> float:
            return float(function(*(values[k] for k in order)))

    unknown = set(grads) - set(inputs)
    if unknown:
        raise ValueError(f"gradients given for unknown inputs {sorted(unknown)}")
    f0 = call(inputs) if function_value is None else float(function_value)

    def partial(name: str, j: int, h: float) -> float:
        moved = inputs[name].astype(np.float64 if inputs[name].dtype.kind != "f"
                                    else inputs[name].dtype, copy=True)
        moved.reshape(-1)[j] += h
        return (call({**inputs, name: moved}) - f0) / h

    for name, grad in grads.items():
        if grad.shape != inputs[name].shape:
            raise AssertionError(f"gradient wrt {name!r} has shape {grad.shape}, expected "
                                 f"{inputs[name].shape}")
        flat = grad.reshape(-1)
        num = np.zeros(flat.shape, np.float64)
        wrong = []
        for j in range(flat.size):
            def close(d: float, want: float = float(flat[j])) -> bool:
                return bool(abs(d - want) < atol + rtol * abs(d))

            d = partial(name, j, delta)
            if not close(d):
                d = (d + partial(name, j, -delta)) / 2  # central difference
                if not close(d):
                    half = (partial(name, j, delta / 2) + partial(name, j, -delta / 2)) / 2
                    d = (4 * half - d) / 3  # five-point
            if not close(d):
                wrong.append(np.unravel_index(j, grad.shape))
            num[j] = d
        dist = float(np.sqrt(np.sum((num - flat) ** 2)))
        norm = float(np.sqrt(np.sum(num ** 2)))
        if not (np.isfinite(dist) and np.isfinite(norm)):
            raise ValueError(f"NaN or infinity in the gradient check wrt {name!r}:\n"
                             f"analytical {grad}\nnumerical {num.reshape(grad.shape)}")
        bound = atol * np.sqrt(flat.size) + rtol * norm
        if dist > bound:
            raise AssertionError(
                f"analytical and numerical gradients wrt {name!r} differ: distance {dist:g} > "
                f"atol*sqrt(n) + rtol*|numerical| = {bound:g}; {len(wrong)} of {flat.size} "
                f"elements differ, first: {wrong[:10]}\nanalytical {grad}\n"
                f"numerical {num.reshape(grad.shape)}")
        logging.info("numerical gradient wrt %r of shape %s passes (distance %g)", name,
                     grad.shape, dist)


def assert_prim_expr_equal(lhs: Any, rhs: Any) -> None:
    """Assert that two integer expressions are equal for all values of their variables (the
    simplifier proves ``lhs - rhs == 0``)."""
    from ..arith import Analyzer
    from ..tir.expr import convert

    ana = Analyzer()
    diff = ana.simplify(convert(lhs) - convert(rhs))
    if not (hasattr(diff, "value") and diff.value == 0):
        raise ValueError(f"{lhs} and {rhs} are not equal: their difference simplifies to {diff}")


# ---- targets -----------------------------------------------------------------------------------
def _kind(target: Any) -> str:
    text = target if isinstance(target, str) else str(getattr(target, "kind", target))
    return text.split()[0] if text.split() else text


def _device_exists(kind: str) -> bool:
    from ..runtime import device

    try:
        return bool(device(kind).exist)
    except ValueError:  # a kind with no device name here (hexagon, ...)
        return False


def _get_targets(target_str: str | None = None) -> list[dict[str, Any]]:
    """The candidate targets with ``is_enabled`` (can compile) and ``is_runnable`` (can also
    run here), from ``target_str``, else ``TVM_TEST_TARGETS``, else the default list."""
    from ..runtime import enabled

    if target_str is None:
        target_str = os.environ.get("TVM_TEST_TARGETS", "")
    names = list(dict.fromkeys(t.strip() for t in target_str.split(";") if t.strip()))
    targets = []
    for name in names or DEFAULT_TEST_TARGETS:
        kind = _kind(name)
        is_enabled = enabled(kind)
        targets.append({"target": name, "target_kind": kind, "is_enabled": is_enabled,
                        "is_runnable": is_enabled and _device_exists(kind)})
    if not any(t["is_runnable"] for t in targets):
        if not enabled("llvm"):
            raise RuntimeError(f"none of the test targets {target_str!r} can run here, and llvm "
                               "is not available to fall back on (install llvmlite)")
        logging.warning("none of the test targets %r can run here (TVM_TEST_TARGETS); "
                        "defaulting to llvm", target_str)
        return _get_targets("llvm")
    return targets


def enabled_targets() -> list[tuple[str, Any]]:
    """``[(target string, device)]`` of the test targets that can compile and run here."""
    from ..runtime import device

    return [(t["target"], device(t["target_kind"])) for t in _get_targets() if t["is_runnable"]]


def device_enabled(target: str) -> bool:
    """Whether tests should use ``target`` (its kind is among the runnable test targets)."""
    if not isinstance(target, str):
        raise TypeError(f"device_enabled takes a target string, got {type(target).__name__}")
    kind = _kind(target)
    return any(t["target_kind"] == kind for t in _get_targets() if t["is_runnable"])


# ---- marks -------------------------------------------------------------------------------------
def _compose(args: tuple[Any, ...], marks: list[Any]) -> Any:
    """``@mark_fn`` applies the marks to the function; ``mark_fn()`` returns them as a list."""
    if args:
        f = args[0]
        for m in reversed(marks):
            f = m(f)
        return f
    return marks


def uses_gpu(*args: Any) -> Any:
    """Mark a test that uses a GPU when there is one (pytest mark ``gpu``); it runs anyway."""
    import pytest

    return _compose(args, [pytest.mark.gpu])


def requires_gpu(*args: Any) -> Any:
    """Skip the test unless a GPU device (cuda, rocm, opencl, metal, vulkan) exists."""
    import pytest

    have = any(_device_exists(k) for k in _GPU_DEVICES)
    return _compose(args, [pytest.mark.skipif(not have, reason="No GPU present"), *uses_gpu()])


def _requires_kind(kind: str, what: str, *extra: Any) -> list[Any]:
    import pytest

    return [getattr(pytest.mark, kind),
            pytest.mark.skipif(not device_enabled(kind), reason=f"{what} support not enabled"),
            *extra]


def requires_cuda(*args: Any) -> Any:
    """Skip the test unless target cuda can run here (an NVIDIA GPU and NVRTC)."""
    return _compose(args, _requires_kind("cuda", "CUDA", *requires_gpu()))


def requires_nvptx(*args: Any) -> Any:
    """Skip the test unless target nvptx can run here (an NVIDIA GPU and llvmlite)."""
    return _compose(args, _requires_kind("nvptx", "NVPTX", *requires_gpu()))


def requires_opencl(*args: Any) -> Any:
    """Skip the test unless target opencl can run here (pyopencl and a driver, e.g. PoCL)."""
    return _compose(args, _requires_kind("opencl", "OpenCL", *requires_gpu()))


def requires_vulkan(*args: Any) -> Any:
    """Skip the test unless target vulkan can run here (the vulkan binding and a driver, e.g.
    Mesa's lavapipe)."""
    return _compose(args, _requires_kind("vulkan", "Vulkan", *requires_gpu()))


def requires_llvm(*args: Any) -> Any:
    """Skip the test unless target llvm can run here."""
    return _compose(args, _requires_kind("llvm", "LLVM"))


def requires_rpc(*args: Any) -> Any:
    """Skip the test unless RPC is available (always in tvmpy: tvmpy.rpc is pure Python)."""
    import pytest

    from ..runtime import enabled

    return _compose(args, [pytest.mark.skipif(not enabled("rpc"), reason="RPC not enabled")])


def requires_package(*packages: str) -> Callable[[Any], Any]:
    """Skip the test unless every named Python package imports."""
    import importlib.util

    import pytest

    def missing(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):
            return True

    marks = [pytest.mark.skipif(missing(p), reason=f"Cannot import '{p}'") for p in packages]

    def wrap(func: Any) -> Any:
        for m in marks:
            func = m(func)
        return func

    return wrap


def _target_requirements(target: Any) -> list[Any]:
    """The marks that a parametrization over ``target`` gets for one value."""
    by_kind = {"cuda": requires_cuda, "nvptx": requires_nvptx, "opencl": requires_opencl,
               "vulkan": requires_vulkan,
               "llvm": requires_llvm}
    kind = _kind(target)
    if kind in by_kind:
        return list(by_kind[kind]())
    import pytest

    from ..runtime import enabled

    return [pytest.mark.skipif(not enabled(kind), reason=f"target {kind!r} not enabled here")]


# ---- parametrization ---------------------------------------------------------------------------
def parametrize_targets(*args: Any) -> Any:
    """``@parametrize_targets("llvm", "cuda")``: run the test once per target; a target that
    cannot run here is skipped, a ``known_failing_targets`` kind (decorated below this) is
    xfail. The test takes ``target`` (the string) and may take ``dev`` (TVM 0.8) or ``ctx``
    (TVM 0.7), its device; this works with or without the plugin. The bare
    ``@parametrize_targets`` runs a test over all test targets: with the plugin it leaves that
    to the plugin (as TVM 0.8), without it only a test taking ``ctx`` (TVM 0.7 style) is
    parametrized here."""
    if len(args) == 1 and callable(args[0]):
        func = args[0]
        if "ctx" not in _param_names(func):
            return func  # the plugin parametrizes a test taking target / dev
        excluded = getattr(func, "tvm_excluded_targets", ())
        return _parametrize_over([t["target"] for t in _get_targets()
                                  if t["target_kind"] not in excluded])(func)
    for a in args:
        if not isinstance(a, str):
            raise TypeError(f"parametrize_targets takes target strings, got {a!r}")
    return _parametrize_over(list(args))


def _param_names(func: Callable[..., Any]) -> list[str]:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return []


def _parametrize_over(targets: list[str]) -> Callable[[Any], Any]:
    """Parametrize ``target`` and the device arguments (``dev`` / ``ctx``) the test takes."""
    import pytest

    def wrap(func: Any) -> Any:
        devs = [n for n in ("dev", "ctx") if n in _param_names(func)]
        failing = getattr(func, "tvm_known_failing_targets", ())
        params = []
        for t in targets:
            marks = list(_target_requirements(t))
            if _kind(t) in failing:
                marks.append(pytest.mark.xfail(reason=f'known failing test for target "{_kind(t)}"'))
            try:
                from ..runtime import device

                d: Any = device(_kind(t))
            except ValueError:  # no such device here (vulkan, ...): skipped by the marks
                d = None
            params.append(pytest.param(t, *([d] * len(devs)), marks=marks, id=t))
        return pytest.mark.parametrize(",".join(["target", *devs]), params)(func)

    return wrap


def exclude_targets(*targets: str) -> Callable[[Any], Any]:
    """Leave the given target kinds out of the automatic ``target`` parametrization."""
    def wrap(func: Any) -> Any:
        func.tvm_excluded_targets = targets
        return func

    return wrap


def known_failing_targets(*targets: str) -> Callable[[Any], Any]:
    """Mark the test xfail for the given target kinds of its ``target`` parametrization."""
    def wrap(func: Any) -> Any:
        func.tvm_known_failing_targets = targets
        return func

    return wrap


def parameter(*values: Any, ids: Sequence[str] | None = None,
              by_dict: Mapping[str, Any] | None = None) -> Any:
    """``size = tvm.testing.parameter(1, 10, 100)``: a parametrized fixture; a test taking
    ``size`` runs once per value (every combination with other such parameters)."""
    import pytest

    if by_dict is not None:
        if values or ids:
            raise ValueError("parameter(by_dict=...) takes no positional values or ids")
        ids, values = tuple(by_dict), tuple(by_dict.values())
    if not values:
        raise ValueError("parameter() needs at least one value")

    @pytest.fixture(params=values, ids=ids)
    def as_fixture(*_cls: Any, request: Any) -> Any:
        return request.param

    return as_fixture


_parametrize_group = 0


def parameters(*value_sets: Sequence[Any], ids: Sequence[str] | None = None) -> list[Any]:
    """``size, dtype = tvm.testing.parameters((16, "float32"), (512, "float16"))``: fixtures
    whose values go together: a test taking them runs once per set, not per combination (the
    plugin parametrizes them jointly)."""
    import pytest

    global _parametrize_group
    group, _parametrize_group = _parametrize_group, _parametrize_group + 1
    widths = {len(v) for v in value_sets}
    if len(widths) != 1:
        raise ValueError(f"parameters(): every value set needs the same length, got {value_sets}")
    outputs = []
    for column in zip(*value_sets):
        def fixture_func(*_cls: Any, request: Any) -> Any:
            return request.param

        fixture_func.parametrize_group = group  # type: ignore[attr-defined]
        fixture_func.parametrize_values = column  # type: ignore[attr-defined]
        fixture_func.parametrize_ids = ids  # type: ignore[attr-defined]
        outputs.append(pytest.fixture(fixture_func))
    return outputs


def fixture(func: Callable[..., Any] | None = None, *, cache_return_value: bool = False) -> Any:
    """``@tvm.testing.fixture``: a function-scoped pytest fixture. With
    ``cache_return_value=True`` the function runs once per distinct argument set and each test
    gets a deep copy (off when ``TVM_TEST_DISABLE_CACHE`` is non-zero); the cache is dropped
    after the last test that uses it, which the plugin counts."""
    import pytest

    cache = cache_return_value and not int(os.environ.get("TVM_TEST_DISABLE_CACHE", "0") or 0)

    def wrap(f: Callable[..., Any]) -> Any:
        return pytest.fixture(_fixture_cache(f) if cache else f, scope="function")

    return wrap if func is None else wrap(func)


def _fixture_cache(func: Callable[..., Any]) -> Callable[..., Any]:
    cache: dict[Any, Any] = {}
    uses = [0]  # tests that use the fixture: set by the plugin at collection
    done = [0]

    def key_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            hash((args, tuple(sorted(kwargs.items()))))
            return (args, tuple(sorted(kwargs.items())))
        except TypeError:
            try:
                return pickle.dumps((args, kwargs))
            except (TypeError, pickle.PicklingError) as e:
                raise TypeError("a cached tvm.testing.fixture needs hashable or picklable "
                                "arguments") from e

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if uses[0] == 0:
            raise RuntimeError("tvm.testing.fixture(cache_return_value=True) needs the plugin: "
                               "add pytest_plugins = ['tvmpy.testing.plugin'] to conftest.py")
        try:
            key = key_of(args, kwargs)
            if key not in cache:
                cache[key] = func(*args, **kwargs)
            yield copy.deepcopy(cache[key])
        finally:
            done[0] += 1
            if done[0] >= uses[0]:
                cache.clear()

    wrapper.num_tests_use_this_fixture = uses  # type: ignore[attr-defined]
    return wrapper


def main() -> None:
    """Run the calling test file under pytest with this process's command-line arguments."""
    import pytest

    caller = inspect.getsourcefile(sys._getframe(1))
    if caller is None:
        raise RuntimeError("tvm.testing.main() must be called from a test file")
    sys.exit(pytest.main([caller, *sys.argv[1:]]))
