"""``tvm.contrib.download``: the test-data cache, and a clear, prompt error offline."""

from __future__ import annotations

import pytest

import tvmpy as tvm
from tvmpy.contrib import download as dl


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("TVM_TEST_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def test_cached_file_is_used_without_network(root, monkeypatch):
    want = root / "onnx" / "super_resolution.onnx"
    want.parent.mkdir(parents=True)
    want.write_bytes(b"model bytes")
    monkeypatch.setenv("TVMPY_OFFLINE", "1")  # any network access would raise
    path = tvm.contrib.download.download_testdata("https://example.invalid/x.onnx",
                                                  "super_resolution.onnx", module="onnx")
    assert path == str(want)
    nested = root / "a" / "b" / "c.txt"
    nested.parent.mkdir(parents=True)
    nested.write_text("c")
    assert dl.download_testdata("https://example.invalid/c", "c.txt", module=["a", "b"]) == \
        str(nested)


def test_missing_file_offline_says_where_to_put_it(root, monkeypatch):
    monkeypatch.setenv("TVMPY_OFFLINE", "1")
    with pytest.raises(dl.OfflineError, match=r"cannot download https://example.invalid/cat.png"
                                              r".*put the file at .*data/data/cat.png"):
        dl.download_testdata("https://example.invalid/cat.png", "cat.png", module="data")


def test_unreachable_url_fails_promptly(root, monkeypatch):
    monkeypatch.delenv("TVMPY_OFFLINE", raising=False)
    # .invalid never resolves (RFC 2606): offline or not, the download fails
    with pytest.raises(dl.OfflineError, match=r"looks offline; put the file at .*cat\.png"):
        dl.download_testdata("https://tvmpy-test.invalid/cat.png", "cat.png", module="data")
    assert not (root / "data" / "cat.png").exists()  # no partial file left behind
    assert not list((root / "data").glob("*.part"))


def test_file_url_and_bad_arguments(root, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"\x00\x01payload")
    path = dl.download_testdata(src.as_uri(), "copy.bin", module="m")
    assert open(path, "rb").read() == b"\x00\x01payload"
    with pytest.raises(ValueError, match="relpath must be a file name"):
        dl.download_testdata(src.as_uri(), "")
    with pytest.raises(TypeError, match="module must be a str or a list"):
        dl.download_testdata(src.as_uri(), "x", module=3)
