"""Fixtures of the RPC tests: libraries built once, a loopback server per test (killed in
teardown), a session on it, and ``no_leaks`` (no process or temporary file outlives a test)."""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import psutil
import pytest

from tvmpy import rpc

from . import rpc_util


@pytest.fixture(scope="session")
def libs(tmp_path_factory):
    return rpc_util.build_libs(str(tmp_path_factory.mktemp("rpc_libs")))


@pytest.fixture
def server():
    srv = rpc.Server(port=0, silent=True, start_timeout=60)
    yield srv
    srv.terminate()


@pytest.fixture
def remote(server):
    sess = rpc.connect("127.0.0.1", server.port, timeout=30, call_timeout=60,
                       token=server.token)
    yield sess
    sess.close()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def no_leaks(tmp_path_factory):
    """Fail a test that leaves a process it started running (or unreaped), or a file in the
    temporary directory its servers and workers use (a private TMPDIR), after its teardown.
    Request it first (``pytestmark = pytest.mark.usefixtures("no_leaks")``)."""
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    tmp = tmp_path_factory.mktemp("rpc_tmp")
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None  # re-read TMPDIR
    try:
        yield tmp
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
    end = time.monotonic() + 15
    while True:
        procs = [p for p in me.children(recursive=True) if p.pid not in before]
        files = sorted(p.name for p in tmp.iterdir())
        if not (procs or files) or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert not procs, f"processes left behind: {procs}"
    assert not files, f"temporary files left behind in {tmp}: {files}"
