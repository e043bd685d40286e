"""``remote.get_function(name)`` reaches the server's PackedFunc registry: functions registered
on the server with ``tvm.register_func`` and the runtime's own (``tvm.contrib.cblas.*``), called
with remote arrays; nothing else is reachable (an unknown name is a clear error) and bad
arguments to a C function come back as errors, the server staying up."""

from __future__ import annotations

import secrets
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import rpc
from tvmpy.rpc.server import server_env

from .rpc_util import read_ready

SERVER = textwrap.dedent("""
    import sys
    import tvmpy as tvm

    @tvm.register_func("test.rpc.scale_into")
    def scale_into(x, y, k):
        y.copyfrom(x.numpy() * k)
        return float(x.numpy().sum())

    from tvmpy.rpc.server import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture
def registry_remote(tmp_path):
    script = tmp_path / "server_with_funcs.py"
    script.write_text(SERVER)
    token = secrets.token_urlsafe(32)
    env = server_env("native", token)
    proc = subprocess.Popen([sys.executable, str(script), "--host", "127.0.0.1", "--port", "0",
                             "--exit-with-parent"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    try:
        line, _ = read_ready(proc)
        port = int(line.rsplit(":", 1)[1])
        sess = rpc.connect("127.0.0.1", port, timeout=30, call_timeout=60, token=token)
        yield sess, proc
        sess.close()
    finally:
        proc.terminate()
        proc.wait(10)


def test_remote_get_function_registry(registry_remote):
    remote, proc = registry_remote
    rng = np.random.default_rng(3)
    dev = remote.cpu(0)
    x = rng.uniform(-1, 1, (5, 3)).astype("float32")
    a, b = tvm.nd.array(x, dev), tvm.nd.empty((5, 3), "float32", dev)
    f = remote.get_function("test.rpc.scale_into")
    total = f(a, b, 3.0)
    np.testing.assert_allclose(b.numpy(), x * 3, rtol=1e-6)
    assert total == pytest.approx(float(x.sum()), rel=1e-5)

    # the runtime's C functions, on the server's arrays
    mm = remote.get_function("tvm.contrib.cblas.matmul")
    p, q = rng.uniform(-1, 1, (7, 4)).astype("float32"), rng.uniform(-1, 1, (4, 2)).astype("float32")
    c = tvm.nd.empty((7, 2), "float32", dev)
    mm(tvm.nd.array(p, dev), tvm.nd.array(q, dev), c, False, False)
    np.testing.assert_allclose(c.numpy(), p @ q, rtol=1e-5, atol=1e-6)
    with pytest.raises(Exception, match="shapes do not match"):
        mm(tvm.nd.array(p, dev), tvm.nd.array(p, dev), c, False, False)
    with pytest.raises(Exception, match="must be an array"):
        mm(tvm.nd.array(p, dev), "q", c, False, False)

    # only registered names; the server is still there afterwards
    for name in ("no.such.function", "os.system", "tvmpy.runtime.packed_func.register_func"):
        with pytest.raises(ValueError, match="no server function.*tvm.register_func"):
            remote.get_function(name)
    assert proc.poll() is None
    assert remote.get_function("runtime.ping")(1, "a") == [1, "a"]


def test_local_session_get_function():
    tvm.register_func("test.rpc.local_twice", lambda v: 2 * v, override=True)
    with rpc.LocalSession() as sess:
        assert sess.get_function("test.rpc.local_twice")(21) == 42
        with pytest.raises(ValueError, match="no server function"):
            sess.get_function("test.rpc.absent")
