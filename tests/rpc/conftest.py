"""Fixtures of the RPC tests: libraries built once, a loopback server per test (killed in
teardown), a session on it."""

from __future__ import annotations

import numpy as np
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
