"""The ``tvmpy`` command line, run as a user runs it (``python -m tvmpy ...`` in a subprocess):
compile -> run round trip against onnxruntime, bench, demo (small image), and the errors."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvmpy import cli  # noqa: E402
from tvmpy.cli import bench as cli_bench  # noqa: E402

RNG = np.random.default_rng(7)


def _tiny(batch=1, symbolic=False, extra_node=None):
    """x [N,3,8,8] -> Conv(4, 3x3) -> Relu -> GlobalAveragePool -> Flatten -> Gemm(5) + y [N,5]."""
    n = "N" if symbolic else batch
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    fw = numpy_helper.from_array(RNG.standard_normal((5, 4)).astype(np.float32), "fw")
    fb = numpy_helper.from_array(RNG.standard_normal(5).astype(np.float32), "fb")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1),
             helper.make_node("Add", ["g", "y"], ["out"])]
    if extra_node is not None:
        nodes.append(extra_node)
    g = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3, 8, 8]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 5])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [n, 5])], initializer=[w, fw, fb])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def _tvmpy(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "tvmpy", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A directory with tiny.onnx, inputs x.npy / y.npy and tiny.so compiled once."""
    d = tmp_path_factory.mktemp("cli")
    m = _tiny()
    onnx.save(m, d / "tiny.onnx")
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    y = RNG.standard_normal((1, 5)).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    r = _tvmpy("compile", d / "tiny.onnx", "-o", d / "tiny.so", "--opt-level", "3")
    assert r.returncode == 0, r.stderr
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x, "y": y})[0]
    return d, want, r


def test_compile_run_roundtrip(work):
    d, want, compiled = work
    assert "tiny.so" in compiled.stdout and "input x: (1, 3, 8, 8)" in compiled.stdout
    assert "codegen" in compiled.stderr  # the build's progress (one line per stage: no tty)
    r = _tvmpy("run", d / "tiny.so", "--input", f"x={d / 'x.npy'}", "--input",
               f"y={d / 'y.npy'}", "--output", d / "out.npz", "--repeat", "3")
    assert r.returncode == 0, r.stderr
    assert "output0: shape (1, 5) float32" in r.stdout and "best of the next 2" in r.stdout
    got = np.load(d / "out.npz")["output0"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_compile_default_output_and_opt0(tmp_path):
    onnx.save(_tiny(), tmp_path / "m.onnx")
    r = _tvmpy("compile", tmp_path / "m.onnx", "--opt-level", "0", "--target", "llvm")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m.so").is_file() and "opt_level 0" in r.stdout


def test_symbolic_batch_compiles_once_for_every_batch(tmp_path):
    """A dynamic-batch model compiles without --input-shape; the library runs at any batch."""
    m = _tiny(symbolic=True)
    onnx.save(m, tmp_path / "s.onnx")
    r = _tvmpy("compile", tmp_path / "s.onnx", "-o", tmp_path / "d.so")
    assert r.returncode == 0, r.stderr
    assert "input x: (? (N), 3, 8, 8)" in r.stdout
    sess = ort.InferenceSession(m.SerializeToString())
    for b in (1, 3):
        x = RNG.standard_normal((b, 3, 8, 8)).astype(np.float32)
        y = RNG.standard_normal((b, 5)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        np.save(tmp_path / "y.npy", y)
        r = _tvmpy("run", tmp_path / "d.so", "--input", f"x={tmp_path / 'x.npy'}",
                   "--input", f"y={tmp_path / 'y.npy'}", "--output", tmp_path / "o.npz")
        assert r.returncode == 0, r.stderr
        want = sess.run(None, {"x": x, "y": y})[0]
        np.testing.assert_allclose(np.load(tmp_path / "o.npz")["output0"], want, rtol=1e-5,
                                   atol=1e-5)
    np.save(tmp_path / "y.npy", RNG.standard_normal((2, 5)).astype(np.float32))  # x has batch 3
    r = _tvmpy("run", tmp_path / "d.so", "--input", f"x={tmp_path / 'x.npy'}",
               "--input", f"y={tmp_path / 'y.npy'}")
    assert r.returncode == 2, r.stderr
    assert "dimension 0 is 2" in r.stderr and "dimension 0 is 3" in r.stderr, r.stderr


def test_symbolic_batch_fixed_by_input_shape(tmp_path):
    m = _tiny(symbolic=True)
    onnx.save(m, tmp_path / "s.onnx")
    r = _tvmpy("compile", tmp_path / "s.onnx", "-o", tmp_path / "s.so",
               "--input-shape", "x=2,3,8,8", "--input-shape", "y=2,5")
    assert r.returncode == 0, r.stderr
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    y = RNG.standard_normal((2, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    r = _tvmpy("run", tmp_path / "s.so", "--input", f"x={tmp_path / 'x.npy'}",
               "--input", f"y={tmp_path / 'y.npy'}", "--output", tmp_path / "o.npz")
    assert r.returncode == 0, r.stderr
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x, "y": y})[0]
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["output0"], want, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("case, message", [
    ("unknown", "unknown input(s) ['z']"),
    ("missing", "missing input(s) ['y']"),
    ("shape", "--input x: expected shape (1, 3, 8, 8) float32, got (1, 3, 8, 9) float32"),
    ("dtype", "convert with .astype('float32')"),
    ("nofile", "no such file"),
    ("badfile", "is not a .npy array file"),
    ("syntax", "expected NAME=FILE.npy"),
])
def test_run_errors(work, case, message):
    d = work[0]
    x, y = f"x={d / 'x.npy'}", f"y={d / 'y.npy'}"
    np.save(d / "x_bad.npy", np.zeros((1, 3, 8, 9), np.float32))
    np.save(d / "x_f64.npy", np.zeros((1, 3, 8, 8), np.float64))
    (d / "junk.npy").write_bytes(b"not numpy")
    args = {"unknown": [x, y, f"z={d / 'x.npy'}"], "missing": [x],
            "shape": [f"x={d / 'x_bad.npy'}", y], "dtype": [f"x={d / 'x_f64.npy'}", y],
            "nofile": [f"x={d / 'nope.npy'}", y], "badfile": [f"x={d / 'junk.npy'}", y],
            "syntax": ["x", y]}[case]
    r = _tvmpy("run", d / "tiny.so", *[a for v in args for a in ("--input", v)])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("tvmpy run: error:") and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_run_not_a_module(tmp_path):
    (tmp_path / "fake.so").write_bytes(b"\x7fELF garbage")
    r = _tvmpy("run", tmp_path / "fake.so", "--input", "x=x.npy")
    assert r.returncode == 2 and "tvmpy run: error:" in r.stderr and "Traceback" not in r.stderr
    r = _tvmpy("run", tmp_path / "missing.so")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_compile_errors(tmp_path, work):
    d = work[0]
    (tmp_path / "bad.onnx").write_bytes(b"\x01\x02 definitely not protobuf")
    cases = [
        (["compile", tmp_path / "none.onnx"], "no such file"),
        (["compile", tmp_path / "bad.onnx"], "is not a readable ONNX model"),
        (["compile", d / "tiny.onnx", "--input-shape", "x=1,a"], "expected NAME=D0,D1"),
        (["compile", d / "tiny.onnx", "--input-shape", "q=1,2"], "not model inputs"),
        (["compile", d / "tiny.onnx", "--input-shape", "x=1,3,8"], "declares 4 dimensions"),
    ]
    for args, message in cases:
        r = _tvmpy(*args, "-o", tmp_path / "o.so")
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    r = _tvmpy("compile", d / "tiny.onnx", "--opt-level", "7")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_compile_unsupported_ops_listed_once(tmp_path):
    m = _tiny(extra_node=helper.make_node("FancyOp", ["out"], ["z"], name="fancy1",
                                          domain="com.example"))
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    onnx.save(m, tmp_path / "u.onnx")
    r = _tvmpy("compile", tmp_path / "u.onnx", "-o", tmp_path / "u.so")
    assert r.returncode == 2 and "com.example.FancyOp" in r.stderr and "fancy1" in r.stderr
    assert not (tmp_path / "u.so").exists()


def test_bench_tiny(work):
    d = work[0]
    r = _tvmpy("bench", d / "tiny.onnx", "--repeat", "1", "--opt-levels", "0,3",
               "--input", f"x={d / 'x.npy'}", "--threads", "2")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for row in ("tvmpy opt_level 0 (2 threads)", "tvmpy opt_level 3 (2 threads)",
                "onnxruntime (2 threads)", "pytorch (eager, 2 threads)", "max rel error",
                "x onnxruntime (2 threads)", "threads: 2 on every side"):
        assert row in out, out
    table = out[out.index("latency"):]
    assert table.count(" ms ") >= 3  # tvmpy x2 + onnxruntime at least (torch may be absent)
    r = _tvmpy("bench", d / "tiny.onnx", "--input", f"y={d / 'x.npy'}")
    assert r.returncode == 2 and "--input y: expected shape (1, 5) float32" in r.stderr


def _bench_threads_seen(monkeypatch, argv):
    """Run ``tvmpy bench`` in-process; the thread count onnxruntime was given and the
    TVM_NUM_THREADS / OMP_NUM_THREADS tvmpy's build and run saw, and the output."""
    import contextlib

    from tvmpy.relay.testing import compare

    seen = {}
    real_ort, real_build = compare.ort_runner, compare.build

    def ort_runner(model, threads=2):
        seen["ort"] = threads
        return real_ort(model, threads=threads)

    def build(*a, **kw):
        seen["tvm"] = (os.environ.get("TVM_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS"))
        return real_build(*a, **kw)

    monkeypatch.setattr(compare, "ort_runner", ort_runner)
    monkeypatch.setattr(compare, "build", build)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["bench", *map(str, argv), "--repeat", "1", "--opt-levels", "3",
                       "--no-torch"])
    return rc, seen, out.getvalue()


def test_bench_gives_onnxruntime_tvmpys_thread_count(work, monkeypatch):
    """``TVM_NUM_THREADS=1 tvmpy bench`` used to time onnxruntime at 2 threads against one
    tvmpy thread in one ratio column: every side now runs on tvmpy's count, and says so."""
    d = work[0]
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "7")  # TVM_NUM_THREADS wins, as in tvmpy's pool
    rc, seen, out = _bench_threads_seen(monkeypatch, [d / "tiny.onnx"])
    assert rc == 0, out
    assert seen == {"ort": 1, "tvm": ("1", "1")}
    for text in ("tvmpy opt_level 3 (1 thread)", "onnxruntime (1 thread)",
                 "x onnxruntime (1 thread)", "threads: 1 on every side"):
        assert text in out, out
    # --threads sets every side, over the environment
    rc, seen, out = _bench_threads_seen(monkeypatch, [d / "tiny.onnx", "--threads", "3"])
    assert rc == 0 and seen == {"ort": 3, "tvm": ("3", "3")}, out
    assert "onnxruntime (3 threads)" in out and "tvmpy opt_level 3 (3 threads)" in out


def test_bench_threads_default_follows_the_pools_rule(monkeypatch):
    """No --threads: TVM_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs of the affinity mask;
    values tvmpy's pool ignores (not a whole number in 1..4095) are ignored here too."""
    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert cli_bench.bench_threads(None) == 5 and os.environ["TVM_NUM_THREADS"] == "5"
    for bad in ("abc", "0", "-2", "4096", "2x"):
        monkeypatch.setenv("TVM_NUM_THREADS", bad)
        monkeypatch.setenv("OMP_NUM_THREADS", bad)
        assert cli_bench.bench_threads(None) == len(os.sched_getaffinity(0))
    with pytest.raises(cli.CliError, match="--threads must be at least 1, got 0"):
        cli_bench.bench_threads(0)


def test_demo_small_image():
    r = _tvmpy("demo", "--image", "32", "--opt-levels", "3", "--repeat", "1", "--no-torch",
               "--profile", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "built-in resnet18" in r.stdout and "(1, 3, 32, 32)" in r.stdout
    assert "max rel error" in r.stdout and "tvmpy opt_level 3" in r.stdout
    assert "MISMATCH" not in r.stderr and "check passed" in r.stdout
    prof = r.stdout[r.stdout.index("slowest kernels at opt_level 3"):].splitlines()
    assert all(" ms " in ln for ln in prof[1:4]) and "conv2d" in prof[1], r.stdout


def test_demo_module_entry_and_help():
    r = subprocess.run([sys.executable, "-m", "tvmpy.demo", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "--image" in r.stdout
    r = _tvmpy("--help")
    assert r.returncode == 0 and all(c in r.stdout for c in ("compile", "run", "bench", "demo"))
    r = _tvmpy()
    assert r.returncode == 2 and "COMMAND" in r.stderr


def test_console_script_declared():
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml")).read()
    assert 'tvmpy = "tvmpy.cli:main"' in text
    # the script sits beside the interpreter of the environment tvmpy is installed in (CI runs
    # the venv's python without activating the venv, so PATH may not have it)
    beside = os.path.join(os.path.dirname(sys.executable), "tvmpy")
    exe = beside if os.path.exists(beside) else shutil.which("tvmpy")
    if exe is None:
        pytest.skip("package installed before the entry point existed (pip install -e . again)")
    r = subprocess.run([exe, "demo", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--image" in r.stdout


# ---- bad models and arguments: one `error:` line, status 2, never a traceback ----------------


def _one_error_line(r, command, message):
    lines = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"tvmpy {command}: error:"), r.stderr
    assert message in lines[0], (message, r.stderr)
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args, command, message", [
    (["rpc", "server", "--port", "70000"], "rpc server", "port 70000 is out of range 0..65535"),
    (["rpc", "server", "--port-end", "-1"], "rpc server", "expected a port number, got '-1'"),
    (["rpc", "tracker", "--port", "65536"], "rpc tracker", "port 65536 is out of range"),
    (["rpc", "status", "--tracker", "127.0.0.1:x"], "rpc status", "expected a port number"),
    (["rpc", "server", "--tracker", "127.0.0.1:0", "--key", "k"], "rpc server",
     "port 0 is out of range 1..65535"),
    (["tune", "m.onnx", "--trials", "1", "--log", "l.json", "--tracker", "h:99999",
      "--rpc-key", "k"], "tune", "port 99999 is out of range 1..65535"),
])
def test_port_out_of_range_is_a_usage_error(args, command, message):
    _one_error_line(_tvmpy(*args, timeout=60), command, message)


def _bad_model(kind):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node, inits, ins = {
        "softmax-axis-float": (helper.make_node("Softmax", ["x"], ["y"], axis=1.5, name="sm"),
                               [], [x]),
        "transpose-perm-str": (helper.make_node("Transpose", ["x"], ["y"], perm="abc",
                                                name="tr"), [], [x]),
        "gather-axis-7": (helper.make_node("Gather", ["x", "i"], ["y"], axis=7, name="ga"), [],
                          [x, helper.make_tensor_value_info("i", TensorProto.INT64, [2])]),
        "int32-zero-point": (helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"],
                                              name="q"),
                             [numpy_helper.from_array(np.float32(0.5), "s"),
                              numpy_helper.from_array(np.int32(2), "z")], [x]),
    }[kind]
    m = helper.make_model(helper.make_graph([node], "g", ins, [y], initializer=inits),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def test_compile_bad_models_and_arguments(tmp_path, work):
    d = work[0]
    (tmp_path / "empty.onnx").write_bytes(b"")
    (tmp_path / "nograph.onnx").write_bytes(b"\x08\x07")  # parses: a ModelProto, ir_version 7
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    (tmp_path / "file").write_text("a regular file")
    for kind in ("softmax-axis-float", "transpose-perm-str", "gather-axis-7", "int32-zero-point"):
        onnx.save(_bad_model(kind), tmp_path / f"{kind}.onnx")
    out = ["-o", tmp_path / "o.so"]
    cases = [
        ([tmp_path / "empty.onnx", *out], "is not an ONNX model (empty file)"),
        ([tmp_path / "nograph.onnx", *out], "is not an ONNX model (it parses, but holds no graph)"),
        ([tmp_path / "softmax-axis-float.onnx", *out],
         "Softmax node 'sm': attribute 'axis' must be of type INT, got FLOAT 1.5"),
        ([tmp_path / "transpose-perm-str.onnx", *out],
         "Transpose node 'tr': attribute 'perm' must be of type INTS, got STRING 'abc'"),
        ([tmp_path / "gather-axis-7.onnx", *out], "Gather node 'ga': axis must be in"),
        ([tmp_path / "int32-zero-point.onnx", *out], "QuantizeLinear node 'q': y_zero_point"),
        ([d / "tiny.onnx", "--input-shape", "x=99999999999999999999,3,8,8", *out],
         "more than a tensor can hold"),
        ([d / "tiny.onnx", "--tuning-log", tmp_path / "deep.json", *out],
         f"{tmp_path / 'deep.json'} is not an autotvm tuning log"),
        ([d / "tiny.onnx", "-o", tmp_path / "missing" / "dir" / "t.so"],
         f"the directory {str(tmp_path / 'missing' / 'dir')!r} does not exist"),
        ([d / "tiny.onnx", "-o", tmp_path / "file" / "t.so"],
         f"{str(tmp_path / 'file')!r} is a file, not a directory"),
    ]
    for args, message in cases:
        _one_error_line(_tvmpy("compile", *args), "compile", message)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "o.so").exists()


def test_model_needing_more_memory_than_any_machine(tmp_path):
    """131 TiB of tensors: compile warns naming the largest tensor, run fails with one line; a
    tensor past 2**63 bytes is refused when compiling."""
    def expand(n, rank):
        g = helper.make_graph(
            [helper.make_node("Expand", ["x", "s"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
            "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n] + [1] * (rank - 1))],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [n] * rank)],
            initializer=[numpy_helper.from_array(np.array([n] * rank, np.int64), "s")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 9
        return m

    n = 6_000_000  # (n, n) float32: 131 TiB, more than a process can address on x86-64/AArch64
    onnx.save(expand(n, 2), tmp_path / "huge.onnx")
    np.save(tmp_path / "x.npy", np.ones((n, 1), np.float32))
    r = _tvmpy("compile", tmp_path / "huge.onnx", "-o", tmp_path / "huge.so")
    assert r.returncode == 0, r.stderr
    assert "warning: running this model needs 131.0 TiB of memory" in r.stderr
    assert "shape (6000000, 6000000) float32, 131.0 TiB" in r.stderr
    r = _tvmpy("run", tmp_path / "huge.so", "--input", f"x={tmp_path / 'x.npy'}")
    _one_error_line(r, "run", "out of memory: graph executor: cannot allocate")
    onnx.save(expand(2**32, 3), tmp_path / "huger.onnx")
    r = _tvmpy("compile", tmp_path / "huger.onnx", "-o", tmp_path / "huger.so")
    _one_error_line(r, "compile", "more than a 64-bit machine can address")


def test_run_gather_index_out_of_range_names_the_node(tmp_path):
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="embed")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      [5, 3]),
                                        helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.save(m, tmp_path / "g.onnx")
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "ok.npy", np.array([4, -5], np.int64))
    np.save(tmp_path / "bad.npy", np.array([1, 5], np.int64))
    assert _tvmpy("compile", tmp_path / "g.onnx", "-o", tmp_path / "g.so").returncode == 0
    r = _tvmpy("run", tmp_path / "g.so", "--input", f"x={tmp_path / 'x.npy'}", "--input",
               f"i={tmp_path / 'ok.npy'}", "--output", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["output0"], x[[4, -5]])
    r = _tvmpy("run", tmp_path / "g.so", "--input", f"x={tmp_path / 'x.npy'}", "--input",
               f"i={tmp_path / 'bad.npy'}")
    _one_error_line(r, "run", "Gather node 'embed': index out of range")


# ---- in-process units -------------------------------------------------------------------------


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def test_progress_bar_tty_redraws_one_line():
    s = _Stream(True)
    bar = cli.ProgressBar("build", stream=s)
    for k in range(1, 11):
        bar("lower", k, 10)
    bar("codegen", 1, 1)
    bar.close()
    text = s.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and text.count("\r") >= 2
    last = text.split("\r")[-1]
    assert "codegen" in last and "1/1" in last and "#" * 28 in last


def test_progress_bar_log_one_line_per_stage():
    s = _Stream(False)
    bar = cli.ProgressBar("build", stream=s)
    for k in range(1, 6):
        bar("lower", k, 5)
    bar("codegen", 0, 1)
    bar("codegen", 1, 1)
    bar.close()
    lines = s.getvalue().splitlines()
    assert [ln.split("(")[0].strip() for ln in lines] == ["build: lower 5/5", "build: codegen 1/1"]


def test_parse_shape_args():
    assert cli.parse_shape_args(["a=1,3,224,224", "b.c:0=7"]) == {"a": (1, 3, 224, 224),
                                                                 "b.c:0": (7,)}
    assert cli.parse_shape_args(None) == {}
    for bad in ("a", "=1,2", "a=1,,2", "a=-1,2", "a=x"):
        with pytest.raises(cli.CliError, match="NAME=D0,D1"):
            cli.parse_shape_args([bad])
    with pytest.raises(cli.CliError, match="given twice"):
        cli.parse_shape_args(["a=1", "a=2"])
    for huge in ("a=99999999999999999999", "a=3000000000,3000000000"):
        with pytest.raises(cli.CliError, match="more than a tensor can hold"):
            cli.parse_shape_args([huge])


def test_error_line_of_every_failure():
    """main() turns any exception into one line (the traceback only with DEBUG=1)."""
    deep = cli._error_line(RecursionError("maximum recursion depth exceeded"), "m.onnx")
    assert deep.startswith("m.onnx: the input is nested too deeply to be processed")
    assert cli._error_line(MemoryError("Unable to allocate 131. TiB")) == \
        "out of memory: Unable to allocate 131. TiB"
    assert cli._error_line(OverflowError("int too big")) == "OverflowError: int too big"
    assert "internal error: DEBUG=1" in cli._error_line(AttributeError("x"))
    assert "\n" not in cli._error_line(ValueError("a")) and cli._error_line(KeyError("k"))
