"""TVM's ``tvm.contrib.download``: test data for tutorials, kept in a local cache.

``download_testdata(url, relpath, module=None, overwrite=False)`` returns the path
``<root>/<module>/<relpath>``, where ``<root>`` is ``$TVM_TEST_DATA`` or ``~/.tvm_test_data``
(TVM's folder, so files TVM already fetched are found). A file already there is used as it is,
with no network access. A missing one is downloaded (``timeout`` seconds per attempt, so an
offline machine never hangs); when that fails, or when ``TVMPY_OFFLINE=1`` forbids the network,
the error says the machine looks offline and where to put the file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

__all__ = ["download", "download_testdata", "test_data_root", "OfflineError"]

TIMEOUT_S = 20.0  # per attempt: connecting and each read


class OfflineError(RuntimeError):
    """A file is neither in the local cache nor downloadable (no network)."""


def test_data_root() -> Path:
    """Where ``download_testdata`` keeps files: ``$TVM_TEST_DATA`` or ``~/.tvm_test_data``."""
    return Path(os.environ.get("TVM_TEST_DATA") or Path.home() / ".tvm_test_data")


def _offline() -> bool:
    return os.environ.get("TVMPY_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def download(url: str, path: str | os.PathLike, overwrite: bool = False,
             size_compare: bool = False, verbose: int = 1, retries: int = 3,
             timeout: float = TIMEOUT_S) -> None:
    """Download ``url`` to ``path`` (TVM's signature) unless the file is there already (or
    ``overwrite``). The file appears only once complete (written beside it, then renamed).
    ``size_compare`` is accepted for TVM's signature; a present file is kept as it is."""
    path = Path(path)
    if path.is_file() and not overwrite:
        return
    where = (f"put the file at {path} (the test-data cache: $TVM_TEST_DATA or "
             "~/.tvm_test_data) and run again")
    if _offline():
        raise OfflineError(f"cannot download {url}: TVMPY_OFFLINE is set (no network); {where}")
    if not isinstance(retries, int) or retries < 1:
        raise ValueError(f"download: retries must be a positive int, got {retries!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    last: Exception | None = None
    for _ in range(retries):
        fd, part = tempfile.mkstemp(prefix=path.name + ".", suffix=".part", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
                shutil.copyfileobj(resp, out)
            os.replace(part, path)
            if verbose:
                print(f"downloaded {url} to {path}")
            return
        except (urllib.error.URLError, OSError, ValueError) as err:  # no network, DNS, timeout
            last = err
        finally:
            if os.path.exists(part):
                os.unlink(part)
        if isinstance(last, ValueError):  # not a URL at all: retrying will not help
            break
    raise OfflineError(f"cannot download {url} ({type(last).__name__}: {last}); this machine "
                       f"looks offline; {where}")


def download_testdata(url: str, relpath: str, module: str | Sequence[str] | None = None,
                      overwrite: bool = False) -> str:
    """The local path of test data ``relpath`` (under ``module``: a folder name or a list of
    them) in the test-data cache, downloading ``url`` there first when it is missing."""
    if not isinstance(relpath, str) or not relpath:
        raise ValueError(f"download_testdata: relpath must be a file name, got {relpath!r}")
    if module is None:
        parts: list[str] = []
    elif isinstance(module, str):
        parts = [module]
    elif isinstance(module, (list, tuple)):
        parts = [str(m) for m in module]
    else:
        raise TypeError(f"download_testdata: module must be a str or a list of str, got "
                        f"{type(module).__name__}")
    path = test_data_root().joinpath(*parts, relpath)
    download(url, path, overwrite=overwrite)
    return str(path)
