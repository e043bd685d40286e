"""The persistent kernel cache: compiled kernels on disk, shared by every build on this machine.

A key names everything that changes a kernel's code (the caller builds it: see
``relay/backend/kernel_build.py``); this module only stores bytes under keys, in
``config CACHE_DIR`` (env ``TVMPY_CACHE_DIR``; default ``$XDG_CACHE_HOME/tvmpy/kernels``, i.e.
``~/.cache/tvmpy/kernels``), and is off with ``TVMPY_CACHE=0``. Entries are pickles written
by tvmpy (like any cache of Python objects, the folder must not be writable by others).

- Concurrent builds: an entry is written to a temporary file in the cache folder and renamed
  over its name (atomic on POSIX), so a reader sees a whole entry or none.
- Damaged entries (truncated, corrupted, another version's format) fail their checksum and are
  treated as absent (removed, then rebuilt and written again); the cache never raises into a
  build: a folder that cannot be written is a cache that stores nothing.
- Code that is not the code on disk: the key holds a digest of tvmpy's sources
  (:func:`source_fingerprint`, read when first needed). A process whose tvmpy sources were
  edited after it imported tvmpy (a long benchmark or notebook while the tree changes, an
  editable install being worked on) runs older code than that digest names, so the cache is
  off for it (:func:`default_cache` returns None, one log line): it neither stores its kernels
  under the new code's key nor serves the new code's kernels to old code.
- Size: after a build, the least recently used entries (by mtime; a hit touches its entry)
  are removed until the folder holds at most ``CACHE_MAX_BYTES`` (1 GiB by default).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import zlib
from pathlib import Path

from .. import config

__all__ = ["KernelCache", "default_cache", "cache_dir", "source_fingerprint",
           "source_changed_since"]

_LOG = logging.getLogger("tvmpy.kernel_cache")
_PKG = Path(__file__).resolve().parent.parent  # tvmpy's package folder

_MAGIC = b"TVMPYKC1"
_SUM = 32  # blake2b digest bytes
_SUFFIX = ".kc"


def cache_dir() -> Path:
    """The cache folder config ``CACHE_DIR`` names, else ``$XDG_CACHE_HOME/tvmpy/kernels``
    (``~/.cache/tvmpy`` holds other things too: the AArch64 sysroot)."""
    given = config.get("CACHE_DIR")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tvmpy" / "kernels"


class KernelCache:
    """Bytes on disk under hex keys, with atomic writes, checksums and LRU eviction."""

    def __init__(self, root: str | os.PathLike[str], max_bytes: int = 1 << 30):
        self.root = Path(root)
        self.max_bytes = int(max_bytes)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        if not key or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"kernel cache keys are lowercase hex digests, got {key!r}")
        return self.root / key[:2] / (key + _SUFFIX)

    def get(self, key: str) -> bytes | None:
        """The payload stored under ``key``, or None (absent or damaged: then removed)."""
        path = self._path(key)
        try:
            blob = path.read_bytes()
        except OSError:
            self.misses += 1
            return None
        payload = _unpack(blob)
        if payload is None:  # truncated / corrupted / foreign: drop it, the build rewrites it
            self.misses += 1
            try:
                path.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(path)  # least recently USED: a hit renews the entry
        except OSError:
            pass
        self.hits += 1
        return payload

    def put(self, key: str, payload: bytes) -> bool:
        """Store ``payload`` under ``key`` (write a temporary file, rename it into place);
        False when the folder cannot be written."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=_SUFFIX)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_pack(payload))
            os.replace(tmp, path)
            return True
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False

    def entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every entry."""
        out = []
        if not self.root.is_dir():
            return out
        for sub in self.root.iterdir():
            if len(sub.name) != 2 or not sub.is_dir():  # entries live in <key[:2]>/
                continue
            for p in sub.iterdir():
                if p.name.endswith(_SUFFIX) and not p.name.startswith(".tmp-"):
                    try:
                        st = p.stat()
                    except OSError:
                        continue
                    out.append((st.st_mtime, st.st_size, p))
        return out

    def size(self) -> int:
        return sum(size for _, size, _ in self.entries())

    def evict(self, max_bytes: int | None = None) -> int:
        """Remove the least recently used entries until at most ``max_bytes`` (default: the
        cache's cap) remain; returns the number removed."""
        cap = self.max_bytes if max_bytes is None else int(max_bytes)
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in sorted(entries, key=lambda e: e[0]):
            if total <= cap:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
        return removed

    def clear(self) -> None:
        self.evict(0)


def _pack(payload: bytes) -> bytes:
    body = zlib.compress(payload, 1)
    return _MAGIC + hashlib.blake2b(body, digest_size=_SUM).digest() + body


def _unpack(blob: bytes) -> bytes | None:
    head = len(_MAGIC) + _SUM
    if len(blob) < head or blob[:len(_MAGIC)] != _MAGIC:
        return None
    body = blob[head:]
    if hashlib.blake2b(body, digest_size=_SUM).digest() != blob[len(_MAGIC):head]:
        return None
    try:
        return zlib.decompress(body)
    except zlib.error:
        return None


def default_cache() -> KernelCache | None:
    """The cache the configuration asks for (``CACHE_DIR``, ``CACHE_MAX_BYTES``), or None when
    it is disabled (``TVMPY_CACHE=0``)."""
    if not config.get("CACHE"):
        return None
    if _stale_process():
        return None
    return KernelCache(cache_dir(), config.get("CACHE_MAX_BYTES"))


_STALE: list[str] = []  # the first source file found changed since import (then it stays off)


def source_changed_since(pkg: Path, since_ns: int) -> str | None:
    """A ``.py`` file under ``pkg`` modified at or after ``since_ns`` (ns since the epoch), or
    None."""
    for p in pkg.rglob("*.py"):
        try:
            if p.stat().st_mtime_ns >= since_ns:
                return str(p)
        except OSError:
            return str(p)  # removed or unreadable since: changed
    return None


def _stale_process() -> bool:
    """Whether tvmpy's sources changed after this process imported them (see the module
    docstring); logged once."""
    if _STALE:
        return True
    since = getattr(sys.modules.get("tvmpy"), "_IMPORTED_NS", None)
    if since is None:
        return False
    changed = source_changed_since(_PKG, since)
    if changed is None:
        return False
    _STALE.append(changed)
    _LOG.warning("kernel cache off in this process: %s changed after tvmpy was imported, so "
                 "the running code is not the code on disk (restart to use the cache)", changed)
    return True


_FINGERPRINT: dict[str, str] = {}


def source_fingerprint() -> str:
    """A digest of tvmpy's own source files (every ``.py`` of the package): a kernel compiled
    by other code of the compiler is another kernel, version number or not."""
    if "fp" not in _FINGERPRINT:
        pkg = _PKG
        h = hashlib.blake2b(digest_size=20)
        for p in sorted(pkg.rglob("*.py")):
            h.update(str(p.relative_to(pkg)).encode() + b"\0")
            try:
                h.update(p.read_bytes())
            except OSError:
                h.update(b"<unreadable>")
        _FINGERPRINT["fp"] = h.hexdigest()
    return _FINGERPRINT["fp"]
