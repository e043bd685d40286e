"""``tvm.contrib.utils.tempdir()``: a temporary directory for exported libraries (as in TVM's
tutorials: ``temp = utils.tempdir(); f.export_library(temp.relpath("f.so"))``)."""

from __future__ import annotations

import os
import shutil
import tempfile

__all__ = ["TempDirectory", "tempdir"]


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
