"""TVM's module file formats: ``Module.save(file, fmt)`` (.o/.ll/.s/.c), ``cc.create_shared`` of a
saved object then ``load_module``, ``export_library("x.tar")`` and ``load_module`` of a .tar or .o,
TVM 0.6's ``tvm.module.load``, cross-compiled (aarch64, armv7l) tars and objects."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.config import config
from tvmpy.contrib import cc
from tvmpy.contrib import tar as ctar
from tvmpy.runtime.linker import elf_arch

N = 37  # a prime: no vector width divides it


def _schedule(parallel: bool = False):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: te.exp(A[i]) * B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    if parallel:
        xo, _ = s[C].split(C.op.axis[0], factor=8)
        s[C].parallel(xo)
    return s, [A, B, C]


def _check(mod, n: int = N) -> None:
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    c = tvm.nd.array(np.zeros(n, "float32"))
    mod(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), np.exp(a) * b + 1.0, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def fadd():
    s, args = _schedule()
    return tvm.build(s, args, "llvm", name="fexp")


def test_save_object_create_shared_load(fadd, tmp_path):
    """TVM's docs: ``f.save("x.o")``, ``cc.create_shared("x.so", ["x.o"])``, ``load_module``."""
    fadd.save(str(tmp_path / "x.o"))
    cc.create_shared(str(tmp_path / "x.so"), [str(tmp_path / "x.o")])
    m = tvm.runtime.load_module(str(tmp_path / "x.so"))
    assert m.entry_name == "fexp"
    _check(m)
    _check(m, 1)
    _check(m.get_function("fexp"), 64)


@pytest.mark.parametrize("runtime", ["pool", "gomp"])
def test_saved_parallel_object_links_without_extra_flags(tmp_path, runtime):
    """The parallel runtime's code (pool) or the system library (libgomp, loaded by
    load_module) come with the object: create_shared needs no -l flags."""
    with config(PARALLEL_RUNTIME=runtime):
        s, args = _schedule(parallel=True)
        f = tvm.build(s, args, "llvm", name="fpar")
    f.save(str(tmp_path / "p.o"))
    cc.create_shared(str(tmp_path / "p.so"), [str(tmp_path / "p.o")])
    _check(tvm.runtime.load_module(str(tmp_path / "p.so")), 1031)


def test_saved_object_links_beside_a_library_of_its_own(fadd, tmp_path):
    """The metadata of a saved object is weak: linked into another module, that module's wins."""
    fadd.save(str(tmp_path / "x.o"))
    sig = fadd._meta["functions"]
    again = tvm.runtime.Module.from_objects([(tmp_path / "x.o").read_bytes()], sig, "fexp")
    _check(again)


def test_load_module_of_object_and_tvm_module_load(fadd, tmp_path):
    fadd.save(str(tmp_path / "y.o"))
    _check(tvm.runtime.load_module(str(tmp_path / "y.o")))  # linked to y.o.so, as TVM does
    assert (tmp_path / "y.o.so").exists()
    fadd.export_library(str(tmp_path / "y.so"))
    _check(tvm.module.load(str(tmp_path / "y.so")))  # TVM 0.6's spelling
    assert tvm.module.enabled("llvm") and not tvm.module.enabled("no_such_target")


def test_save_sources(fadd, tmp_path):
    fadd.save(str(tmp_path / "x.ll"))
    assert "define" in (tmp_path / "x.ll").read_text()
    fadd.save(str(tmp_path / "x.s"))
    asm = (tmp_path / "x.s").read_text()
    assert "fexp:" in asm and asm == fadd.get_source("asm")
    fadd.save(str(tmp_path / "x.txt"), fmt="ll")  # fmt overrides the extension
    assert (tmp_path / "x.txt").read_text() == (tmp_path / "x.ll").read_text()
    with pytest.raises(ValueError, match=r"no 'c' source in this module; available: ll, asm"):
        fadd.save(str(tmp_path / "x.c"))
    with pytest.raises(ValueError, match="cannot tell the format"):
        fadd.save(str(tmp_path / "noext"))
    s, args = _schedule()
    fc = tvm.build(s, args, "c", name="fexp_c")
    fc.save(str(tmp_path / "k.c"))
    assert "fexp_c" in (tmp_path / "k.c").read_text()
    fc.save(str(tmp_path / "k.o"))
    cc.create_shared(str(tmp_path / "k.so"), [str(tmp_path / "k.o")])
    _check(tvm.runtime.load_module(str(tmp_path / "k.so")))


def test_export_tar_and_load(fadd, tmp_path):
    path = str(tmp_path / "lib.tar")
    fadd.export_library(path)
    with tarfile.open(path) as t:
        names = t.getnames()
    assert names and all(n.endswith(".o") for n in names)
    _check(tvm.runtime.load_module(path))
    fadd.export_library(str(tmp_path / "lib2.tar"), ctar.tar)  # TVM's fcompile=tar.tar
    _check(tvm.runtime.load_module(str(tmp_path / "lib2.tar")))
    # its objects linked by hand work too (what a device without tvmpy's loader does)
    ctar.untar(path, str(tmp_path / "u"))
    cc.create_shared(str(tmp_path / "u.so"), sorted(str(p) for p in (tmp_path / "u").iterdir()))
    _check(tvm.runtime.load_module(str(tmp_path / "u.so")))


def test_load_bad_tar(tmp_path):
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar at all" * 64)
    with pytest.raises(ValueError, match="is not a tar file"):
        tvm.runtime.load_module(str(bad))
    (tmp_path / "evil.txt").write_text("x")
    with tarfile.open(tmp_path / "evil.tar", "w") as t:
        t.add(tmp_path / "evil.txt", arcname="../evil.txt")
    with pytest.raises(ValueError, match="expected only object files"):
        tvm.runtime.load_module(str(tmp_path / "evil.tar"))


def test_loaded_library_refuses_save(fadd, tmp_path):
    fadd.export_library(str(tmp_path / "z.so"))
    loaded = tvm.runtime.load_module(str(tmp_path / "z.so"))
    with pytest.raises(RuntimeError, match="has no object code to link"):
        loaded.save(str(tmp_path / "z.o"))


def _has_cross(arch: str) -> bool:
    from tvmpy.runtime.linker import cross_compiler

    try:
        cross_compiler(arch)
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize("triple, arch", [("armv7l-linux-gnueabihf", "arm"),
                                          ("aarch64-linux-gnu", "aarch64")])
def test_cross_compiled_tar_object_and_library(tmp_path, triple, arch):
    s, args = _schedule(parallel=True)
    f = tvm.build(s, args, f"llvm -mtriple={triple}", name="fx")
    assert f.foreign_arch() == arch
    tar_path = str(tmp_path / "x.tar")
    f.export_library(tar_path)
    with tarfile.open(tar_path) as t:
        objs = [t.extractfile(m).read() for m in t.getmembers()]
    assert {elf_arch(o) for o in objs} == {arch}
    assert {o[4] for o in objs} == {1 if arch == "arm" else 2}  # ELF class: 32- or 64-bit
    with pytest.raises(RuntimeError, match=f"its code is for {arch}"):
        tvm.runtime.load_module(tar_path)
    if not _has_cross(arch):
        pytest.skip(f"no cross toolchain for {arch} (gcc-{triple} or the ziglang wheel)")
    f.save(str(tmp_path / "x.o"))
    f.export_library(str(tmp_path / "x.so"))
    for p in ("x.o", "x.so"):
        with open(tmp_path / p, "rb") as fh:
            assert elf_arch(fh.read(20)) == arch
    with pytest.raises(RuntimeError, match=f"its code is for {arch}"):
        tvm.runtime.load_module(str(tmp_path / "x.so"))


def test_cross_link_without_toolchain_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util
    import shutil

    from tvmpy.runtime import linker

    s, args = _schedule()
    f = tvm.build(s, args, "llvm -mtriple=armv7l-linux-gnueabihf", name="fx")
    real_which, real_spec = shutil.which, importlib.util.find_spec
    monkeypatch.setattr(linker.shutil, "which",
                        lambda c: None if "arm-linux" in c else real_which(c))
    monkeypatch.setattr(linker.importlib.util, "find_spec",
                        lambda n: None if n == "ziglang" else real_spec(n))
    with pytest.raises(RuntimeError, match=r"no cross compiler for arm: install Debian's "
                                           r"gcc-arm-linux-gnueabihf"):
        f.export_library(str(tmp_path / "x.so"))
    with pytest.raises(RuntimeError, match="no cross compiler for arm"):
        f.save(str(tmp_path / "x.o"))  # merging objects needs the target's linker too
    f.export_library(str(tmp_path / "x.tar"))  # a tar needs no linker of the target



def test_armv7_triple_without_vendor_uses_the_eabi():
    """"armv7l-linux-gnueabihf" (TVM's spelling, no vendor) is read as LLVM normalizes it: an
    EABI target, whose integer division calls __aeabi_idiv (what libgcc and zig's compiler-rt
    define), not __divsi3."""
    n = te.var("n")
    d = te.var("d")
    A = te.placeholder((n,), name="A", dtype="int32")
    B = te.compute(A.shape, lambda i: A[i] // d, name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B, d], "llvm -mtriple=armv7l-linux-gnueabihf", name="idiv")
    asm = f.get_source("asm")
    assert "__aeabi_idiv" in asm and "__divsi3" not in asm
    from tvmpy.runtime.linker import normalize_triple

    assert normalize_triple("armv7l-linux-gnueabihf") == "armv7l-unknown-linux-gnueabihf"
    assert normalize_triple("aarch64-unknown-linux-gnu") == "aarch64-unknown-linux-gnu"
    assert normalize_triple("wasm32-unknown-unknown") == "wasm32-unknown-unknown"


def test_load_tar_without_compiler_says_so(fadd, tmp_path):
    fadd.export_library(str(tmp_path / "x.tar"))
    with config(CC="no-such-compiler-tvmpy"):
        with pytest.raises(RuntimeError, match="linked on the machine that loads them, and this "
                                               "one has no C compiler"):
            tvm.runtime.load_module(str(tmp_path / "x.tar"))


def test_relay_factory_for_armv7_exports_a_tar():
    """A whole model (code, graph and parameter blob) for 32-bit ARM, as TVM's deploy tutorials
    export it for a Raspberry Pi: every object of the tar is 32-bit ARM code."""
    import tempfile

    from tvmpy import relay

    x = relay.var("x", shape=(3, 13))
    w = relay.var("w", shape=(7, 13))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w))))
    params = {"w": np.random.default_rng(0).standard_normal((7, 13)).astype("float32")}
    lib = relay.build(mod, "llvm -mtriple=armv7l-linux-gnueabihf", params=params)
    with tempfile.TemporaryDirectory() as tmp:
        lib.export_library(f"{tmp}/net.tar")
        with tarfile.open(f"{tmp}/net.tar") as t:
            objs = [t.extractfile(m).read() for m in t.getmembers()]
    assert len(objs) >= 3 and all(elf_arch(o) == "arm" and o[4] == 1 for o in objs)
    assert any(b"__tvmpy_graph_params" in o for o in objs)  # the parameter blob's symbol
