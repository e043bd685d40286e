"""TVM's ``tvm.contrib.tar``: ``tar(output, files)`` packs files (flat, by their base names) into
a tar archive, ``untar(tar_file, directory)`` unpacks one; ``export_library("x.tar")`` and
``load_module("x.tar")`` read and write such archives of object files."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Sequence

__all__ = ["tar", "untar"]


def tar(output: str, files: Sequence[str], options: Sequence[str] | None = None) -> None:
    """Write the tar archive ``output`` holding ``files`` under their base names (two files with
    one base name are refused: the second would hide the first)."""
    names = [os.path.basename(os.fspath(f)) for f in files]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"tar: several files are named {dup}; rename them first")
    with tarfile.open(os.fspath(output), "w") as out:
        for f, n in zip(files, names):
            out.add(os.fspath(f), arcname=n)


def untar(tar_file: str, directory: str) -> None:
    """Unpack the tar archive ``tar_file`` into ``directory`` (no member may leave it)."""
    with tarfile.open(os.fspath(tar_file)) as src:
        src.extractall(os.fspath(directory), filter="data")


tar.output_format = "tar"  # type: ignore[attr-defined]  # export_library writes a tar with it
