"""Waiting for a child process's "ready" line: how the server, the tracker and the fleet's device
workers learn that a process they started listens (and on which port), never blocking past a
deadline."""

from __future__ import annotations

import os
import select
import subprocess
import time
from typing import IO

__all__ = ["wait_for_line"]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process stuck in the kernel
            pass


def wait_for_line(proc: subprocess.Popen, prefix: str, timeout: float, what: str,
                  cmd: list[str], log: IO[bytes] | None = None) -> str:
    """Read ``proc``'s stdout until a line starting with ``prefix``; return that line (stripped).

    Other lines before it are skipped. ``proc`` is killed and TimeoutError raised after
    ``timeout`` seconds; a process that exits first raises RuntimeError with its exit status,
    ``cmd`` and the tail of ``log`` (its stderr, when captured to a file)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode(errors="replace").strip()
            if text.startswith(prefix):
                return text
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            _kill(proc)
            raise TimeoutError(f"{what} did not start within {timeout:g} s")
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            try:
                rc: int | None = proc.wait(10)
            except subprocess.TimeoutExpired:
                _kill(proc)
                rc = proc.returncode
            err = ""
            if log is not None:
                log.seek(0)
                err = "\n" + log.read()[-4000:].decode(errors="replace")
            raise RuntimeError(f"{what} exited with status {rc} before it was ready: "
                               f"{' '.join(cmd)}{err}")
        buf += chunk
