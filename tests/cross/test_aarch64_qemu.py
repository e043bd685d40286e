"""tvmpy.contrib.qemu: where the sysroot is, the argv of the AArch64 Python, and run_python's
errors (a failing snippet, a timeout: the process is killed, the call returns)."""

from __future__ import annotations

import os

import pytest

from tvmpy.contrib import qemu

from .aarch64_util import sysroot


def test_sysroot_dir_order(tmp_path, monkeypatch):
    monkeypatch.delenv("TVMPY_AARCH64_SYSROOT", raising=False)
    assert qemu.sysroot_dir().endswith(os.path.join(".cache", "tvmpy", "aarch64-sysroot"))
    monkeypatch.setenv("TVMPY_AARCH64_SYSROOT", str(tmp_path / "env"))
    assert qemu.sysroot_dir() == str(tmp_path / "env")
    assert qemu.sysroot_dir(str(tmp_path / "arg")) == str(tmp_path / "arg")


def test_missing_sysroot_names_the_setup_command(tmp_path):
    with pytest.raises(RuntimeError, match="python -m tvmpy.contrib.qemu setup"):
        qemu.find_sysroot(str(tmp_path))
    assert not qemu.available(str(tmp_path))


def test_python_command_runs_aarch64_with_tvmpy_runtime():
    root = sysroot()
    argv = qemu.python_command(root)
    assert any(os.path.basename(a).startswith("qemu-aarch64") for a in argv)
    out = qemu.run_python("import platform, sys, tvmpy.runtime, numpy; "
                          "print(platform.machine(), sys.argv[1:])", ["a", 2], sysroot=root,
                          timeout=300)
    assert out.split()[0] == "aarch64" and "['a', '2']" in out


def test_run_python_errors():
    root = sysroot()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        qemu.run_python("1 / 0", sysroot=root, timeout=300)
    with pytest.raises(TimeoutError, match="ran past 3 s"):
        qemu.run_python("import time; time.sleep(60)", sysroot=root, timeout=3)
