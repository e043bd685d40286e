"""tvm.testing as TVM's test files use it: checks, the test-target list (TVM_TEST_TARGETS), the
requires_* marks, and the pytest plugin's target/dev fixtures and parametrizations (run in an
inner pytest session)."""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.testing

pytest_plugins = ["pytester"]

RNG = np.random.default_rng(26)
HAVE_CUDA = tvm.cuda(0).exist
HAVE_OPENCL = tvm.runtime.enabled("opencl") and tvm.opencl(0).exist
HAVE_VULKAN = importlib.util.find_spec("vulkan") is not None


def test_assert_allclose_defaults_and_ndarrays():
    sig = inspect.signature(tvm.testing.assert_allclose)
    assert sig.parameters["rtol"].default == 1e-7 and sig.parameters["atol"].default == 1e-7
    a = RNG.uniform(size=(3, 5)).astype("float32")
    tvm.testing.assert_allclose(tvm.nd.array(a), a)
    with pytest.raises(AssertionError):
        tvm.testing.assert_allclose(a, a + 1e-5)  # beyond the default 1e-7
    tvm.testing.assert_allclose(a, a + 1e-5, rtol=1e-3)
    with pytest.raises(AssertionError):  # no broadcasting: shapes must match
        tvm.testing.assert_allclose(a[:1], np.broadcast_to(a[:1], (3, 5)))


def test_check_numerical_grads_list_and_dict():
    x = RNG.uniform(0.5, 1.5, size=(2, 3))
    y = RNG.uniform(0.5, 1.5, size=(3,))

    def f(x, y):
        return float(np.sum(np.sin(x) * y))

    gx, gy = np.cos(x) * y, np.sum(np.sin(x), axis=0)
    tvm.testing.check_numerical_grads(f, [x, y], [gx, gy])
    tvm.testing.check_numerical_grads(f, {"x": x, "y": y}, {"y": gy})
    with pytest.raises(AssertionError, match="wrt 'y'"):
        tvm.testing.check_numerical_grads(f, {"x": x, "y": y}, {"y": gy * 1.5})
    with pytest.raises(AssertionError, match="shape"):
        tvm.testing.check_numerical_grads(f, [x, y], [gx, gy[:2]])
    with pytest.raises(TypeError):
        tvm.testing.check_numerical_grads(f, [x, y], {"0": gx})


def test_assert_prim_expr_equal():
    n, m = tvm.te.var("n"), tvm.te.var("m")
    tvm.testing.assert_prim_expr_equal(n * 2 + n, 3 * n)
    tvm.testing.assert_prim_expr_equal((n + m) * 4 - 4 * m, n * 4)
    with pytest.raises(ValueError, match="not equal"):
        tvm.testing.assert_prim_expr_equal(n + 1, n)


def test_runtime_enabled():
    assert tvm.runtime.enabled("llvm") and tvm.runtime.enabled("llvm -mcpu=skylake")
    assert tvm.runtime.enabled("interp") and tvm.runtime.enabled("rpc")
    assert not tvm.runtime.enabled("rocm") and not tvm.runtime.enabled("metal")
    assert tvm.runtime.enabled("vulkan") == HAVE_VULKAN
    with pytest.raises(ValueError, match="target string"):
        tvm.runtime.enabled("")


def test_enabled_targets_follow_tvm_test_targets(monkeypatch, caplog):
    monkeypatch.setenv("TVM_TEST_TARGETS", "llvm")
    assert tvm.testing.enabled_targets() == [("llvm", tvm.cpu(0))]
    assert tvm.testing.device_enabled("llvm -mcpu=znver4")
    assert not tvm.testing.device_enabled("opencl")
    monkeypatch.setenv("TVM_TEST_TARGETS", "cuda; llvm -opt-level=2;cuda")
    names = [t for t, _ in tvm.testing.enabled_targets()]
    assert names == (["cuda"] if HAVE_CUDA else []) + ["llvm -opt-level=2"]
    assert tvm.testing.device_enabled("cuda") == HAVE_CUDA
    monkeypatch.setenv("TVM_TEST_TARGETS", "rocm;metal")  # nothing runnable: llvm, warned
    with caplog.at_level(logging.WARNING):
        assert tvm.testing.enabled_targets() == [("llvm", tvm.cpu(0))]
    assert "defaulting to llvm" in caplog.text
    monkeypatch.delenv("TVM_TEST_TARGETS")
    kinds = [t for t, _ in tvm.testing.enabled_targets()]
    assert kinds[0] == "llvm" and ("opencl" in kinds) == HAVE_OPENCL and ("cuda" in kinds) == HAVE_CUDA
    with pytest.raises(TypeError):
        tvm.testing.device_enabled(tvm.target.Target("llvm"))


def test_marks_without_function_are_lists():
    marks = tvm.testing.requires_cuda()
    assert {m.name for m in marks} >= {"cuda", "skipif", "gpu"}
    skip = [m for m in marks if m.name == "skipif"][0]
    assert skip.args[0] == (not tvm.testing.device_enabled("cuda"))

    @tvm.testing.requires_llvm
    def f():
        pass

    assert {m.name for m in f.pytestmark} == {"llvm", "skipif"}


_PLUGIN_TESTS = '''
import numpy as np
import pytest
import tvmpy as tvm
import tvmpy.testing
from tvmpy import te

size = tvm.testing.parameter(1, 7)
layout = tvm.testing.parameter(by_dict={"rows": "NCHW", "cols": "NHWC"})
n, dtype = tvm.testing.parameters((3, "float32"), (5, "int32"))
CALLS = []


@tvm.testing.fixture(cache_return_value=True)
def reference(size):
    CALLS.append(size)
    return np.arange(size)


def _add_one(target, dev, m):
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    if tvm.target.Target(target).is_gpu:
        bx, tx = s[B].split(B.op.axis[0], factor=4)
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], target)
    a = np.arange(m, dtype="float32")
    b = tvm.nd.array(np.zeros(m, "float32"), dev)
    f(tvm.nd.array(a, dev), b)
    tvm.testing.assert_allclose(b.numpy(), a + 1)


def test_auto_targets(target, dev):
    _add_one(target, dev, 13)


@tvm.testing.parametrize_targets("llvm")
def test_only_llvm(target, dev):
    assert target == "llvm" and dev == tvm.cpu(0)
    _add_one(target, dev, 5)


@tvm.testing.exclude_targets("llvm")
def test_excluded(target):
    assert not target.startswith("llvm")


@tvm.testing.known_failing_targets("llvm")
def test_known_failing(target):
    assert not target.startswith("llvm")


def test_parameter_cross(size, n):
    assert size in (1, 7) and n in (3, 5)


def test_parameters_together(n, dtype):
    assert (n, dtype) in [(3, "float32"), (5, "int32")]


def test_cached_a(reference, size):
    reference[:] = -1  # a copy: the cache keeps the original
    assert len(reference) == size


def test_cached_b(reference, size):
    assert list(reference) == list(range(size))
    assert CALLS.count(size) == 1


@tvm.testing.parametrize_targets
def test_bare_decorator(target):
    assert target in ("llvm", "cuda", "opencl")


def test_by_dict(layout, request):
    assert layout in ("NCHW", "NHWC") and request.node.name.endswith(("[rows]", "[cols]"))


@tvm.testing.requires_gpu
def test_needs_gpu():
    pass


@tvm.testing.requires_cuda
def test_needs_cuda():
    pass


@tvm.testing.requires_llvm
def test_needs_llvm():
    pass


if __name__ == "__main__":
    tvm.testing.main()
'''


def test_plugin_fixtures_and_parametrization(pytester, monkeypatch):
    monkeypatch.setenv("TVM_TEST_TARGETS", "llvm;cuda;opencl")
    pytester.makeconftest('pytest_plugins = ["tvmpy.testing.plugin"]\n')
    pytester.makepyfile(test_user=_PLUGIN_TESTS)
    result = pytester.runpytest("-rsx", "-p", "no:cacheprovider")
    gpu = int(HAVE_CUDA) + int(HAVE_OPENCL)  # runnable GPU targets among cuda, opencl
    # per target (auto, bare decorator, excluded, known failing): 1 + gpu, 1 + gpu, gpu, gpu;
    # test_only_llvm 1, parameter x parameters 4, parameters 2, cached 2 + 2, by_dict 2,
    # requires_gpu (if a GPU), requires_llvm 1, requires_cuda (if cuda)
    passed = (2 + 4 * gpu) + 1 + 4 + 2 + 4 + 2 + int(gpu > 0) + 1 + int(HAVE_CUDA)
    skipped = 4 * (2 - gpu) + int(gpu == 0) + int(not HAVE_CUDA)
    result.assert_outcomes(passed=passed, skipped=skipped, xfailed=1)
    result.stdout.fnmatch_lines(["*CUDA support not enabled*"])


def test_main_runs_the_calling_file(pytester, monkeypatch):
    monkeypatch.setenv("TVM_TEST_TARGETS", "llvm")
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(os.path.dirname(tvm.__file__)))
    pytester.makeconftest('pytest_plugins = ["tvmpy.testing.plugin"]\n')
    path = pytester.makepyfile(test_user=_PLUGIN_TESTS)
    result = pytester.runpython(path)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*passed*"])


_NO_PLUGIN_TESTS = '''
import tvmpy as tvm
import tvmpy.testing


@tvm.testing.parametrize_targets("llvm", "cuda")
def test_explicit(target, dev):
    assert dev == tvm.device(target)


@tvm.testing.parametrize_targets
def test_tvm07_style(target, ctx):
    assert ctx == tvm.device(target)


@tvm.testing.parametrize_targets("llvm", "opencl")
@tvm.testing.known_failing_targets("opencl")
def test_failing_on_opencl(target):
    assert target == "llvm"


@tvm.testing.fixture(cache_return_value=True)
def cached():
    return 1


def test_cache_needs_the_plugin(cached):
    pass
'''


def test_parametrize_targets_without_the_plugin(pytester, monkeypatch):
    """TVM 0.7 files (``ctx``) and explicit target lists need no conftest."""
    monkeypatch.setenv("TVM_TEST_TARGETS", "llvm;cuda;opencl")
    pytester.makepyfile(test_plain=_NO_PLUGIN_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    cuda, ocl = int(HAVE_CUDA), int(HAVE_OPENCL)
    # explicit: llvm + cuda; 0.7 style: llvm, cuda, opencl; failing: llvm passes, opencl xfails
    result.assert_outcomes(passed=(1 + cuda) + (1 + cuda + ocl) + 1,
                           skipped=2 * (1 - cuda) + 2 * (1 - ocl), xfailed=ocl, errors=1)
    result.stdout.fnmatch_lines(["*needs the plugin*pytest_plugins*"])
