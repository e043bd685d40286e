"""A real AArch64 process on an x86-64 machine: qemu-user with an AArch64 Python + numpy sysroot.

Libraries exported for ``-mtriple=aarch64-linux-gnu`` run here in an AArch64 Python under
Debian's ``qemu-user`` (``qemu-aarch64 -L SYSROOT``), which loads them with tvmpy's runtime
(``tvmpy.runtime`` + numpy only; no compiler) exactly as on a board.

- :func:`setup_sysroot` builds the sysroot reproducibly from registry packages: Debian 12's
  arm64 ``python3.11-minimal``/``libpython3.11-stdlib`` and the C libraries they need
  (``apt-get download`` + ``dpkg-deb -x``; needs root once for ``dpkg --add-architecture
  arm64`` and ``apt-get update``) and numpy's manylinux2014 aarch64 wheel (``pip download``),
  unpacked into ``SYSROOT/site``. CLI: ``python -m tvmpy.contrib.qemu setup [--dir D]``.
- The sysroot is ``$TVMPY_AARCH64_SYSROOT``, else ``~/.cache/tvmpy/aarch64-sysroot``.
- :func:`python_command` is the argv that starts that Python with tvmpy's source folder and
  numpy on its path (RPC servers under qemu use it); :func:`run_python` runs a snippet in it.

Everything here is emulation: timings measure qemu, not a board; correctness is what counts.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence

__all__ = ["PY_VERSION", "NUMPY_VERSION", "DEB_PACKAGES", "sysroot_dir", "find_qemu",
           "find_sysroot", "setup_sysroot", "python_command", "run_python", "available"]

PY_VERSION = "3.11"  # Debian 12 (bookworm)'s Python
NUMPY_VERSION = "2.2.6"  # pinned: the sysroot is the same wherever it is built
#: the Debian arm64 packages of the sysroot: Python and the libraries its stdlib loads
DEB_PACKAGES = (
    f"python{PY_VERSION}-minimal", f"libpython{PY_VERSION}-minimal",
    f"libpython{PY_VERSION}-stdlib", "libffi8", "libexpat1", "zlib1g", "libc6", "libgcc-s1",
    "libstdc++6", "libbz2-1.0", "liblzma5", "libssl3", "libsqlite3-0", "libncursesw6",
    "libtinfo6", "libreadline8", "libuuid1", "libcrypt1", "libnsl2", "libtirpc3", "libgomp1",
)
_ENV = "TVMPY_AARCH64_SYSROOT"
_MANIFEST = "tvmpy-sysroot.json"


def sysroot_dir(path: str | None = None) -> str:
    """The sysroot folder: ``path``, else ``$TVMPY_AARCH64_SYSROOT``, else
    ``~/.cache/tvmpy/aarch64-sysroot``."""
    if path:
        return os.path.abspath(path)
    env = os.environ.get(_ENV)
    if env:
        return os.path.abspath(env)
    return os.path.join(os.path.expanduser("~"), ".cache", "tvmpy", "aarch64-sysroot")


def find_qemu() -> str:
    """The path of ``qemu-aarch64`` (or ``qemu-aarch64-static``)."""
    for name in ("qemu-aarch64", "qemu-aarch64-static"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("qemu-aarch64 not found: install Debian's qemu-user "
                       "(apt-get install qemu-user)")


def _python(root: str) -> str:
    return os.path.join(root, "usr", "bin", f"python{PY_VERSION}")


def find_sysroot(path: str | None = None) -> str:
    """The sysroot folder, checked to hold the AArch64 Python and numpy."""
    root = sysroot_dir(path)
    if not os.path.exists(_python(root)) or not os.path.isdir(os.path.join(root, "site", "numpy")):
        raise RuntimeError(f"no AArch64 Python sysroot at {root}: build it with "
                           f"`python -m tvmpy.contrib.qemu setup --dir {root}` (or set {_ENV})")
    return root


def available(path: str | None = None) -> bool:
    """Whether qemu-aarch64 and a sysroot are there."""
    try:
        find_qemu()
        find_sysroot(path)
    except RuntimeError:
        return False
    return True


def _source_root() -> str:
    """The folder holding the ``tvmpy`` package (put on the device Python's path)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python_command(sysroot: str | None = None) -> list[str]:
    """argv that starts the AArch64 Python under qemu with tvmpy's source folder and the
    sysroot's numpy on ``sys.path`` (and nothing of the host's Python environment)."""
    root = find_sysroot(sysroot)
    path = os.pathsep.join([_source_root(), os.path.join(root, "site")])
    return ["env", "-u", "PYTHONHOME", "-u", "PYTHONSTARTUP", f"PYTHONPATH={path}",
            "PYTHONNOUSERSITE=1", find_qemu(), "-L", root, _python(root)]


def run_python(code: str, args: Sequence[str] = (), timeout: float = 600,
               sysroot: str | None = None, cwd: str | None = None) -> str:
    """Run ``code`` in the AArch64 Python (``sys.argv[1:]`` = ``args``); return its stdout.
    A non-zero exit raises RuntimeError with its output, a run past ``timeout`` seconds
    TimeoutError (the process is killed)."""
    argv = python_command(sysroot) + ["-c", code, *map(str, args)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as err:
        raise TimeoutError(f"the AArch64 Python ran past {timeout} s:\n{err.stderr or ''}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"the AArch64 Python failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-4000:]}{proc.stderr[-8000:]}")
    return proc.stdout


def _run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def _ensure_arm64_apt() -> None:
    """``dpkg --add-architecture arm64`` and ``apt-get update`` when arm64 is not set up yet."""
    foreign = subprocess.run(["dpkg", "--print-foreign-architectures"], capture_output=True,
                             text=True, check=True).stdout.split()
    known = subprocess.run(["apt-cache", "show", "libc6:arm64"], capture_output=True).returncode == 0
    if "arm64" in foreign and known:
        return
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise RuntimeError("the sysroot needs Debian's arm64 package lists: run as root once "
                           "(dpkg --add-architecture arm64 && apt-get update)")
    if "arm64" not in foreign:
        _run(["dpkg", "--add-architecture", "arm64"])
    _run(["apt-get", "update", "-qq"])


def setup_sysroot(path: str | None = None, force: bool = False) -> str:
    """Build the AArch64 Python + numpy sysroot at :func:`sysroot_dir` ``(path)`` (see the
    module docstring); returns its folder. An existing complete sysroot is kept unless
    ``force``."""
    root = sysroot_dir(path)
    if not force and os.path.exists(os.path.join(root, _MANIFEST)):
        find_sysroot(root)
        return root
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} not found: the sysroot is built from Debian packages")
    _ensure_arm64_apt()
    staging = root + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(os.path.join(staging, "site"))
    with tempfile.TemporaryDirectory(prefix="tvmpy_sysroot_") as tmp:
        _run(["apt-get", "download", "-qq"] + [f"{p}:arm64" for p in DEB_PACKAGES], cwd=tmp)
        debs = sorted(glob.glob(os.path.join(tmp, "*.deb")))
        for deb in debs:
            _run(["dpkg-deb", "-x", deb, staging])
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
              "--platform", "manylinux2014_aarch64", "--python-version", PY_VERSION,
              "--implementation", "cp", "--abi", "cp" + PY_VERSION.replace(".", ""),
              "-d", tmp, f"numpy=={NUMPY_VERSION}"])
        wheels = glob.glob(os.path.join(tmp, "numpy-*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"pip download of numpy gave {wheels}")
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(os.path.join(staging, "site"))
        manifest = {"python": PY_VERSION, "numpy": NUMPY_VERSION,
                    "debs": [os.path.basename(d) for d in debs],
                    "wheel": os.path.basename(wheels[0])}
    with open(os.path.join(staging, _MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    os.replace(staging, root)
    find_sysroot(root)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tvmpy.contrib.qemu",
                                 description="AArch64 Python sysroot for qemu-user")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="build the sysroot (Debian arm64 packages + numpy wheel)")
    s.add_argument("--dir", default=None, help=f"folder (default ${_ENV} or ~/.cache/tvmpy/...)")
    s.add_argument("--force", action="store_true", help="rebuild an existing sysroot")
    c = sub.add_parser("check", help="run numpy and tvmpy.runtime in the AArch64 Python")
    c.add_argument("--dir", default=None)
    sub.add_parser("command", help="print the argv that starts the AArch64 Python").add_argument(
        "--dir", default=None)
    a = ap.parse_args(argv)
    if a.cmd == "setup":
        print(setup_sysroot(a.dir, a.force))
        a.cmd = "check"
    if a.cmd == "check":
        print(run_python("import platform, numpy, tvmpy.runtime; "
                         "print(platform.machine(), 'numpy', numpy.__version__, 'ok')",
                         sysroot=a.dir, timeout=300).strip())
    elif a.cmd == "command":
        print(" ".join(python_command(a.dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
