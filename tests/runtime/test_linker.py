"""linker: metadata embedding (in-process object and compiled-C paths), errors."""

import ctypes
import json

import pytest

from tvmpy import config
from tvmpy.runtime import linker

TRICKY = {"q": 'a"b\\c', "trigraph": "??=??/", "nl": "x\ny\tz", "utf8": "é→∑", "n": [1, 2.5, None]}


def _read_meta(path):
    lib = ctypes.CDLL(str(path))
    addr = ctypes.addressof(ctypes.c_char.in_dll(lib, "__tvmpy_metadata"))
    err = ctypes.c_char_p.in_dll(lib, "__tvmpy_last_error")
    return json.loads(ctypes.string_at(addr).decode("utf-8")), err.value


@pytest.fixture(scope="module")
def obj():
    return linker.compile_c("int answer(void) { return 42; }")


@pytest.mark.parametrize("in_process", [True, False])
def test_metadata_roundtrip(obj, tmp_path, monkeypatch, in_process):
    if not in_process:
        monkeypatch.setattr(linker, "metadata_object", lambda *a: None)
    else:
        assert linker.metadata_object("{}", obj) is not None
    text = json.dumps(TRICKY, ensure_ascii=False)
    path = tmp_path / "m.so"
    linker.link_shared([obj], text, str(path))
    meta, err = _read_meta(path)
    assert meta == TRICKY and err is None
    assert ctypes.CDLL(str(path)).answer() == 42


def test_metadata_without_objects(tmp_path):
    path = tmp_path / "empty.so"
    linker.link_shared([], json.dumps({"functions": []}), str(path))
    assert _read_meta(path)[0] == {"functions": []}


def test_strong_error_symbol_wins(tmp_path):
    o = linker.compile_c('const char* __tvmpy_last_error = "preset";')
    path = tmp_path / "strong.so"
    linker.link_shared([o], "{}", str(path))
    assert _read_meta(path)[1] == b"preset"


def test_link_and_compile_errors(obj, tmp_path):
    with pytest.raises(RuntimeError, match="linking shared library failed"):
        linker.link_shared([obj], "{}", str(tmp_path / "x.so"), ["no_such_library_xyz"])
    with pytest.raises(RuntimeError, match="compiling C source failed"):
        linker.compile_c("this is not C")
    with config.config(CC="/nonexistent/cc"):
        with pytest.raises(RuntimeError, match="C compiler '/nonexistent/cc' not found"):
            linker.compile_c("int x;")


def test_foreign_objects_fall_back_to_c():
    assert linker.metadata_object("{}", b"\x7fELF" + b"\x01" * 60) is None  # 32-bit ELF
    assert linker.metadata_object("{}", None) is None
