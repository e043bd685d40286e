"""Every refusal of issue 9's security point: binding beyond the loopback, clients without or with
a wrong token, paths leading out of the session's directory, oversized and malformed frames,
non-numeric array data. Each refusal leaves the server serving the next client."""

from __future__ import annotations

import ast
import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import rpc
from tvmpy.rpc import protocol
from tvmpy.rpc.protocol import Limits, recv_frame, send_frame

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-t0ken-for-tests"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


# ---- binding ---------------------------------------------------------------------------------
def test_binding_beyond_loopback_needs_flag_and_token():
    with pytest.raises(PermissionError, match="allow_remote"):
        rpc.Server(host="127.0.0.2", port=0)
    with pytest.raises(PermissionError, match="token"):
        rpc.Server(host="127.0.0.2", port=0, allow_remote=True, insecure_no_token=True)
    with rpc.Server(host="127.0.0.2", port=0, allow_remote=True, token=TOKEN, silent=True) as srv:
        with rpc.connect("127.0.0.2", srv.port, token=TOKEN) as sess:
            assert sess.ping() == "pong"
        with pytest.raises(rpc.AuthenticationError, match="requires a token"):
            rpc.connect("127.0.0.2", srv.port)


@pytest.mark.parametrize("extra", [[], ["--allow-remote", "--insecure-no-token"]])
def test_cli_refuses_remote_bind(extra):
    env = _env()
    env.pop("TVMPY_RPC_TOKEN", None)
    proc = subprocess.run([sys.executable, "-m", "tvmpy.rpc.server", "--host", "0.0.0.0",
                           "--port", "0", *extra], capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 2
    assert "refusing to bind '0.0.0.0'" in proc.stderr
    assert "listening" not in proc.stdout


# ---- tokens ----------------------------------------------------------------------------------
@pytest.fixture
def token_server():
    with rpc.Server(port=0, token=TOKEN, silent=True) as srv:
        yield srv


def test_token_required_and_checked(token_server):
    port = token_server.port
    with pytest.raises(rpc.AuthenticationError, match="requires a token"):
        rpc.connect("127.0.0.1", port)
    with pytest.raises(rpc.AuthenticationError, match="wrong token"):
        rpc.connect("127.0.0.1", port, token="not-the-token")
    with rpc.connect("127.0.0.1", port, token=TOKEN) as sess:
        dev = sess.cpu(0)
        x = np.arange(6, dtype="float32").reshape(2, 3)
        np.testing.assert_array_equal(tvm.nd.array(x, dev).numpy(), x)


def test_client_without_answer_is_refused(token_server):
    """A client that skips the challenge (no mac) gets no session."""
    s = socket.create_connection(("127.0.0.1", token_server.port), timeout=10)
    greet, _ = recv_frame(s, Limits())
    assert greet["auth"] is True
    send_frame(s, {"proto": "tvmpy-rpc", "version": 1, "key": "", "cnonce": "00"})
    reply, _ = recv_frame(s, Limits())
    assert reply["ok"] is False and "requires a token" in reply["error"]["message"]
    s.close()


def test_token_never_sent_in_clear():
    """The client's answer is an HMAC: the token's bytes are not on the wire."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(20)
    seen = bytearray()

    def fake_server() -> None:
        conn, _ = listener.accept()
        conn.settimeout(10)
        send_frame(conn, {"proto": "tvmpy-rpc", "version": 1, "key": "", "auth": True,
                          "nonce": os.urandom(32).hex()})
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            seen.extend(chunk)
            if len(seen) > 100:  # the hello frame arrived; answer nothing
                break
        conn.close()

    t = threading.Thread(target=fake_server)
    t.start()
    with pytest.raises((rpc.RPCError, OSError)):
        rpc.connect("127.0.0.1", listener.getsockname()[1], token=TOKEN, timeout=10)
    t.join(10)
    listener.close()
    assert b'"mac"' in seen and TOKEN.encode() not in seen


def test_client_token_against_tokenless_server():
    with rpc.Server(port=0, insecure_no_token=True, silent=True) as srv:
        assert srv.token is None
        with pytest.raises(rpc.AuthenticationError, match="without a token"):
            rpc.connect("127.0.0.1", srv.port, token=TOKEN)
        with rpc.connect("127.0.0.1", srv.port) as sess:  # explicitly opted out: no token
            assert sess.ping() == "pong"


# ---- paths -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["/etc/passwd", "../escape.txt", "a/../../escape.txt", "..",
                                  "sub/../../x"])
def test_paths_out_of_the_session_directory_refused(remote, name):
    with pytest.raises(PermissionError, match="refused"):
        remote.upload(b"x", target=name)
    with pytest.raises(PermissionError, match="refused"):
        remote.download(name)
    with pytest.raises(PermissionError, match="refused"):
        remote.load_module(name)
    with pytest.raises(PermissionError, match="refused"):
        remote.remove(name)
    assert remote.ping() == "pong"


def test_symlinks_out_of_the_session_directory_refused(remote, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"do not touch")
    workdir = os.path.dirname(remote.get_function("tvm.rpc.server.workpath")("x"))
    os.symlink(outside, os.path.join(workdir, "link"))
    os.symlink(tmp_path, os.path.join(workdir, "dirlink"))
    for name in ("link", "dirlink/outside.txt"):
        with pytest.raises(PermissionError, match="leads out"):
            remote.download(name)
        with pytest.raises(PermissionError, match="leads out"):
            remote.upload(b"overwritten", target=name)
        with pytest.raises(PermissionError, match="leads out"):
            remote.load_module(name)
        with pytest.raises(PermissionError, match="leads out"):
            remote.remove(name)
    with pytest.raises(PermissionError, match="leads out"):
        remote.listdir("dirlink")
    assert outside.read_bytes() == b"do not touch"
    # a link that stays inside is fine
    remote.upload(b"inside", target="real.txt")
    os.symlink(os.path.join(workdir, "real.txt"), os.path.join(workdir, "inner"))
    assert remote.download("inner") == b"inside"


# ---- frames ----------------------------------------------------------------------------------
def _session_socket(port: int, token: str) -> socket.socket:
    """A raw socket past the handshake of a server with ``token``."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    greet, _ = recv_frame(s, Limits())
    send_frame(s, {"proto": "tvmpy-rpc", "version": 1, "key": "", "cnonce": "00",
                   "session_timeout": 0,
                   "mac": protocol.mac(token, b"client", bytes.fromhex(greet["nonce"]),
                                       b"\x00")})
    reply, _ = recv_frame(s, Limits())
    assert reply["ok"]
    return s


def _error_then_closed(s: socket.socket) -> str:
    reply, _ = recv_frame(s, Limits())
    assert reply["ok"] is False and reply.get("closed")
    assert s.recv(1) == b""  # the session is over
    s.close()
    return reply["error"]["message"]


PREFIX = struct.Struct("!4sIIQ")


@pytest.mark.parametrize("prefix, message", [
    (PREFIX.pack(b"TVRP", 10, 1, 1 << 40), "exceeds the limit"),           # 1 TiB of payload
    (PREFIX.pack(b"TVRP", 1 << 30, 0, 0), "header of 1073741824 bytes"),   # 1 GiB header
    (PREFIX.pack(b"TVRP", 10, 1 << 30, 0), "payloads, more than the limit"),
    (PREFIX.pack(b"EVIL", 10, 0, 0), "bad frame: magic"),
])
def test_oversized_and_bad_frames_close_the_session(server, prefix, message):
    s = _session_socket(server.port, server.token)
    s.sendall(prefix)
    assert message in _error_then_closed(s)
    with rpc.connect("127.0.0.1", server.port, token=server.token) as sess:  # still up
        assert sess.ping() == "pong"


def test_truncated_frame_and_garbage_header(server):
    s = _session_socket(server.port, server.token)
    s.sendall(PREFIX.pack(b"TVRP", 100, 0, 0) + b"{")  # then hang up mid-frame
    s.close()
    s = _session_socket(server.port, server.token)
    s.sendall(PREFIX.pack(b"TVRP", 3, 0, 0) + b"\xff\xfe{")
    assert "not JSON" in _error_then_closed(s)
    with rpc.connect("127.0.0.1", server.port, token=server.token) as sess:
        assert sess.ping() == "pong"


@pytest.mark.parametrize("prefix, message", [
    (PREFIX.pack(b"TVRP", 10, 1, 1 << 20), "1 payloads, more than the limit of 0"),
    (PREFIX.pack(b"TVRP", 10, 0, 1 << 20), "payload of 1048576 bytes exceeds the limit of 0"),
    (PREFIX.pack(b"TVRP", 1 << 20, 0, 0), "header of 1048576 bytes exceeds the limit of 4096"),
])
def test_oversized_frame_before_authentication(token_server, prefix, message):
    """Before the handshake the server takes a hello of at most 4 KiB and no payload."""
    s = socket.create_connection(("127.0.0.1", token_server.port), timeout=10)
    recv_frame(s, Limits())
    s.sendall(prefix)
    reply, _ = recv_frame(s, Limits())
    assert reply["ok"] is False and message in reply["error"]["message"]
    s.close()


def test_message_size_limit(tmp_path):
    with rpc.Server(port=0, max_payload=1 << 20, silent=True) as srv:
        with rpc.connect("127.0.0.1", srv.port, token=srv.token) as sess:
            big = tmp_path / "big.bin"
            big.write_bytes(b"\x01" * (2 << 20))
            with pytest.raises(ValueError, match="message limit"):
                sess.upload(str(big))
            with pytest.raises(ValueError, match="message limit"):
                tvm.nd.array(np.zeros(1 << 19, "float32"), sess.cpu(0))
            sess.upload(b"\x02" * (1 << 19), target="ok.bin")  # under the limit: fine
            assert len(sess.download("ok.bin")) == 1 << 19
        # a client that ignores the announced limit is cut off by the server
        s = _session_socket(srv.port, srv.token)
        payload = b"\x00" * ((1 << 20) + 1)
        send_frame(s, {"op": "upload", "name": "x.bin"}, [payload[:16]])  # a good frame first
        recv_frame(s, Limits())
        s.sendall(PREFIX.pack(b"TVRP", 2, 1, len(payload)))
        assert "exceeds the limit" in _error_then_closed(s)


def test_non_numeric_and_inconsistent_arrays_refused(server):
    s = _session_socket(server.port, server.token)
    dev = {"__t": "dev", "type": 1, "id": 0}
    send_frame(s, {"op": "nd_array", "dev": dev,
                   "value": {"__t": "nd", "p": 0, "shape": [1], "dtype": "object"}}, [b"\0" * 8])
    reply, _ = recv_frame(s, Limits())
    assert reply["ok"] is False and "numeric dtype" in reply["error"]["message"]
    send_frame(s, {"op": "nd_array", "dev": dev,
                   "value": {"__t": "nd", "p": 0, "shape": [4], "dtype": "float32"}}, [b"\0" * 8])
    assert "needs 16 bytes" in _error_then_closed(s)


def test_no_pickle_in_the_protocol():
    """Nothing of the wire path can unpickle: none of these modules imports a pickle module."""
    banned = {"pickle", "cPickle", "cloudpickle", "dill", "marshal", "shelve", "joblib"}
    for name in ("protocol", "session", "server", "client"):
        tree = ast.parse((ROOT / "tvmpy" / "rpc" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            assert not {m.split(".")[0] for m in mods} & banned, (name, mods)
    assert protocol.decode({"__t": "dict", "v": {"a": [1, 2.5, "x", None]}}, []) == \
        {"a": [1, 2.5, "x", None]}


def test_recorded_answer_cannot_be_replayed(token_server):
    """An answer recorded from one connection (valid for that server nonce) fails on the next."""
    def greet() -> tuple[socket.socket, bytes]:
        s = socket.create_connection(("127.0.0.1", token_server.port), timeout=10)
        g, _ = recv_frame(s, Limits())
        return s, bytes.fromhex(g["nonce"])

    s1, nonce1 = greet()
    cnonce = os.urandom(32)
    hello = {"proto": "tvmpy-rpc", "version": 1, "key": "", "session_timeout": 0,
             "cnonce": cnonce.hex(), "mac": protocol.mac(TOKEN, b"client", nonce1, cnonce)}
    send_frame(s1, hello)
    assert recv_frame(s1, Limits())[0]["ok"] is True  # genuine on its own connection
    s1.close()
    s2, nonce2 = greet()
    assert nonce2 != nonce1
    send_frame(s2, hello)  # the same bytes again
    reply, _ = recv_frame(s2, Limits())
    assert reply["ok"] is False and "wrong token" in reply["error"]["message"]
    s2.close()


def test_cli_remote_bind_with_flag_and_token_from_the_environment():
    from .rpc_util import ready_line

    env = dict(_env(), TVMPY_RPC_TOKEN=TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "tvmpy", "rpc", "server", "--host", "127.0.0.2",
                             "--port", "0", "--allow-remote"], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        line = ready_line(proc)
        assert line.startswith("tvmpy rpc server listening on 127.0.0.2:"), line
        port = int(line.rsplit(":", 1)[1])
        with rpc.connect("127.0.0.2", port, token=TOKEN) as sess:
            assert sess.ping() == "pong"
        with pytest.raises(rpc.AuthenticationError, match="wrong token"):
            rpc.connect("127.0.0.2", port, token="guess")
    finally:
        proc.terminate()
        proc.wait(30)
