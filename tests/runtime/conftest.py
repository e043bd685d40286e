import pytest

from . import kernels


@pytest.fixture(scope="session")
def kmod():
    """The hand-written ABI kernels of kernels.py, compiled once per session."""
    return kernels.build()
