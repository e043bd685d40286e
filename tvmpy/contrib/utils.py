"""``tvm.contrib.utils.tempdir()``: a temporary directory for exported libraries (as in TVM's
tutorials: ``temp = utils.tempdir(); f.export_library(temp.relpath("f.so"))``); and
:func:`open_for_append`, which every line-per-record log of tvmpy (tuning logs, measurement
tables, findings) is appended through."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from typing import TextIO

__all__ = ["TempDirectory", "tempdir", "open_for_append"]


class TempDirectory:
    """A directory removed when this object is garbage-collected (or by ``remove()``)."""

    def __init__(self, custom_path: str | None = None):
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir, self._owned = os.path.abspath(custom_path), False
        else:
            self.temp_dir, self._owned = tempfile.mkdtemp(prefix="tvmpy_"), True

    def relpath(self, name: str) -> str:
        """The absolute path of ``name`` inside the directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        if self._owned and self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = ""

    def __del__(self) -> None:
        self.remove()

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def tempdir(custom_path: str | None = None) -> TempDirectory:
    return TempDirectory(custom_path)


def open_for_append(path: str | os.PathLike[str], encoding: str = "utf-8") -> TextIO:
    """``path`` opened to append lines of text (created when missing).

    A file that does not end with a newline (its last line was cut: a writer killed in the
    middle of it, a full disk) first gets one, so that the cut line stays on its own line (a
    reader skips it as malformed) instead of having the next record glued onto it, which
    would lose that record as well."""
    f = open(path, "a", encoding=encoding)
    try:
        st = os.fstat(f.fileno())
        if stat.S_ISREG(st.st_mode) and st.st_size > 0:  # (not a pipe, a terminal, ...)
            with open(path, "rb") as probe:
                probe.seek(-1, os.SEEK_END)
                if probe.read(1) != b"\n":
                    f.write("\n")
                    f.flush()
    except BaseException:
        f.close()
        raise
    return f
