"""Reading a shared library's ELF file without loading it.

``dlopen`` runs a library's constructors before the caller can look at anything in it, so
``load_module`` first reads what it needs from the file itself: :func:`check_loadable_size`
(a truncated file would make the loader die of SIGBUS) and :func:`read_dynamic_symbol` (the
bytes of an exported data symbol, ``__tvmpy_metadata``, found through the dynamic symbol table
``.dynsym`` and the ``PT_LOAD`` segment that holds it). ELF32 and ELF64, either byte order.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["ElfError", "read_dynamic_symbol", "check_loadable_size", "elf_machine"]

_SHT_DYNSYM = 11
_PT_LOAD = 1


class ElfError(ValueError):
    """The file is not an ELF shared library, or its headers point outside the file."""


@dataclass
class _Header:
    is64: bool
    endian: str  # "<" or ">"
    machine: int
    phoff: int
    shoff: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int


def _header(fh: BinaryIO, path: str) -> _Header:
    head = fh.read(64)
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        raise ElfError(f"{path} is not an ELF shared library")
    is64, e = head[4] == 2, "<" if head[5] == 1 else ">"
    machine = struct.unpack_from(e + "H", head, 18)[0]
    if is64:
        if len(head) < 64:
            raise ElfError(f"{path}: truncated ELF header")
        phoff, shoff = struct.unpack_from(e + "QQ", head, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(e + "HHHH", head, 54)
    else:
        phoff, shoff = struct.unpack_from(e + "II", head, 28)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(e + "HHHH", head, 42)
    return _Header(is64, e, machine, phoff, shoff, phentsize, phnum, shentsize, shnum)


def _read(fh: BinaryIO, offset: int, size: int, size_limit: int, path: str, what: str) -> bytes:
    if offset < 0 or size < 0 or offset + size > size_limit:
        raise ElfError(f"{path}: the {what} lies outside the file ({offset}+{size} > {size_limit} "
                       "bytes); the file is truncated or corrupt")
    fh.seek(offset)
    return fh.read(size)


def _segments(fh: BinaryIO, h: _Header, size: int, path: str) -> list[tuple[int, int, int]]:
    """(file offset, virtual address, size in the file) of each PT_LOAD segment."""
    need = 56 if h.is64 else 32
    if h.phnum and h.phentsize < need:
        raise ElfError(f"{path}: bad program header size {h.phentsize}")
    table = _read(fh, h.phoff, h.phentsize * h.phnum, size, path, "program header table")
    out = []
    for k in range(h.phnum):
        if h.is64:
            p_type, _, off, vaddr, _, filesz = struct.unpack_from(h.endian + "IIQQQQ", table,
                                                                  k * h.phentsize)
        else:
            p_type, off, vaddr, _, filesz = struct.unpack_from(h.endian + "IIIII", table,
                                                               k * h.phentsize)
        if p_type == _PT_LOAD:
            out.append((off, vaddr, filesz))
    return out


def elf_machine(path: str) -> int | None:
    """The ``e_machine`` of the ELF file at ``path`` (62: x86-64, 183: AArch64); None: not ELF."""
    try:
        with open(path, "rb") as fh:
            return _header(fh, path).machine
    except ElfError:
        return None


def check_loadable_size(path: str) -> None:
    """Refuse a truncated ELF library: dlopen maps its segments past the end of the file and the
    process dies of SIGBUS when the loader touches them. A file that is not ELF passes (dlopen
    reports it cleanly)."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        try:
            h = _header(fh, path)
        except ElfError:
            return
        need = max(h.phoff + h.phentsize * h.phnum, h.shoff + h.shentsize * h.shnum)
        if need <= size:
            try:
                for off, _, filesz in _segments(fh, h, size, path):
                    need = max(need, off + filesz)
            except ElfError:
                pass
    if need > size:
        raise RuntimeError(f"cannot load shared library {path}: the file is truncated ({size} bytes, "
                           f"its headers need {need}); export it again")


def read_dynamic_symbol(path: str, name: str) -> bytes | None:
    """The bytes (``st_size`` of them) of the exported data symbol ``name`` as stored in the
    file, read without loading it; None when the file exports no such symbol (or it has no
    bytes in the file). Raises :class:`ElfError` when the file is not ELF or is corrupt."""
    size = os.path.getsize(path)
    want = name.encode()
    with open(path, "rb") as fh:
        h = _header(fh, path)
        shsize = 64 if h.is64 else 40
        if h.shnum == 0:
            return None  # no section headers (sstrip'ed): no symbol table to read
        if h.shentsize < shsize:
            raise ElfError(f"{path}: bad section header size {h.shentsize}")
        sections = _read(fh, h.shoff, h.shentsize * h.shnum, size, path, "section header table")

        def section(k: int) -> tuple[int, int, int, int, int]:
            """(type, offset, size, link, entsize) of section ``k``."""
            if h.is64:
                _, t, _, _, off, sz, link, _, _, ent = struct.unpack_from(
                    h.endian + "IIQQQQIIQQ", sections, k * h.shentsize)
            else:
                _, t, _, _, off, sz, link, _, _, ent = struct.unpack_from(
                    h.endian + "IIIIIIIIII", sections, k * h.shentsize)
            return t, off, sz, link, ent

        for k in range(h.shnum):
            t, off, sz, link, ent = section(k)
            if t != _SHT_DYNSYM:
                continue
            symsize = 24 if h.is64 else 16
            if ent < symsize or link >= h.shnum:
                raise ElfError(f"{path}: bad dynamic symbol table")
            symbols = _read(fh, off, sz, size, path, "dynamic symbol table")
            _, stroff, strsz, _, _ = section(link)
            strings = _read(fh, stroff, strsz, size, path, "dynamic string table")
            for s in range(sz // ent):
                if h.is64:
                    st_name, _, _, shndx, value, st_size = struct.unpack_from(
                        h.endian + "IBBHQQ", symbols, s * ent)
                else:
                    st_name, value, st_size, _, _, shndx = struct.unpack_from(
                        h.endian + "IIIBBH", symbols, s * ent)
                if shndx == 0 or strings[st_name:st_name + len(want) + 1] != want + b"\0":
                    continue  # undefined here, or another name
                for seg_off, vaddr, filesz in _segments(fh, h, size, path):
                    if vaddr <= value and value + st_size <= vaddr + filesz:
                        return _read(fh, seg_off + value - vaddr, st_size, size, path,
                                     f"symbol {name}")
                return None  # in .bss or outside every segment: no bytes in the file
        return None
