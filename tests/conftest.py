"""Test-wide settings.

Under CI (the CI environment variable set, as `.ci/run` runs) hypothesis is derandomized: every
run explores the same examples, so a submission's CI result does not depend on luck. Locally
each run explores new examples; a failure found there is replayed from .hypothesis/ and should
become an explicit regression test.

The suite builds with strict schedules (``TVMPY_STRICT_SCHEDULES=1``, the default of the
``relay.backend.strict_schedules`` PassContext config, inherited by worker processes): an operator
schedule that raises fails the test instead of silently falling back to the slow default
schedule. A test of the fallback itself opts out with
``PassContext(config={"relay.backend.strict_schedules": False})``.

The persistent kernel cache is off in the suite (``TVMPY_CACHE=0``): a test's build never
depends on the user's ``~/.cache/tvmpy`` nor on what an earlier test compiled (a cache hit
would skip the lowering whose warnings, dumps and errors tests check). The cache's own tests
turn it on for a temporary folder (``tests/relay/test_kernel_cache.py``). Kernels compile in
the test process (``TVMPY_BUILD_WORKERS=1``), the worker pool's own tests excepted; both are
``setdefault``, so a run can opt in from its environment.

CI runs the suite in two pytest-xdist workers (``-n 2 --dist loadfile``: .ci/run, the README's
test command): each test file runs whole in one worker, so its module- and session-scoped builds
are made once, and each worker compiles in its own process, so the two keep both cores busy. What
keeps tests apart across workers: servers and trackers bind port 0, temporary files go under
``tmp_path`` (one base folder per worker), the kernel cache is off, and the leak checks
(tests/rpc) count only the worker's own child processes. A plain ``pytest`` runs serially.

``default_recursion_limit``: the tests of the explicit-stack traversals (ir.functor) use it, so
they hold under Python's default recursion limit however far an earlier relay build in the same
process raised it (FuseOps gives lowering room for its deepest group:
``relay.transform.fuse_ops.ensure_recursion_room``).
"""

import os
import sys

import pytest
from hypothesis import settings

os.environ["TVMPY_STRICT_SCHEDULES"] = "1"
os.environ.setdefault("TVMPY_CACHE", "0")
os.environ.setdefault("TVMPY_BUILD_WORKERS", "1")

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="module")
def default_recursion_limit():
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(saved)
