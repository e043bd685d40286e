"""The ``gemm.x86`` AutoTVM template (the packed GEMM's choices as knobs): its fallback is the
hand-written ``packed_gemm`` schedule, random configs compute ``A @ B`` on awkward shapes, and
topi templates are found by ``task.create`` right after ``import tvmpy``."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm
from tvmpy.topi.x86.gemm import gemm_template, packed_gemm


def _norm(ir: str) -> str:
    # the template splits rows three ways: its innermost row loop is named i.inner.inner
    return re.sub(r"\s+", " ", ir.replace("i.inner.inner", "i.inner"))


def test_fallback_is_the_packed_gemm():
    ctx = autotvm.task.FallbackContext()
    ctx.silent = True
    with ctx:
        s, args = gemm_template(64, 64, 32, "float32")
    s2, args2 = packed_gemm(64, 64, 32)
    assert _norm(str(tvm.lower(s, args))) == _norm(str(tvm.lower(s2, args2)))


def test_space():
    task = autotvm.task.create("gemm.x86", (1024, 1024, 1024, "float32"), "llvm")
    space = task.config_space
    assert set(space.space_map) == {"tile_y", "tile_x", "order", "pack_b", "unroll_k",
                                    "fuse_parallel"}
    # 3-way splits of 2^10 with inner <= 16; panel widths dividing 1024: 16, 32, 64, 128
    assert len(space) == 45 * 4 * 2 * 2 * 4 * 2
    assert all(space.get(i)["tile_y"].size[-1] <= 16 for i in range(0, len(space), 97))
    assert task.flop == 2 * 1024 ** 3


@pytest.mark.parametrize("shape", [(37, 48, 19), (1, 16, 5), (64, 96, 33), (13, 7, 11)])
def test_random_configs_compute_the_product(shape):
    m, n, k = shape
    task = autotvm.task.create("gemm.x86", (m, n, k, "float32"), "llvm")
    rng = np.random.default_rng(sum(shape))
    a = rng.uniform(-1, 1, (m, k)).astype("float32")
    b = rng.uniform(-1, 1, (k, n)).astype("float32")
    idx = rng.choice(len(task.config_space), size=min(6, len(task.config_space)), replace=False)
    for i in idx:
        s, args = task.instantiate(task.config_space.get(int(i)))
        f = tvm.build(s, args, "llvm")
        c = tvm.nd.array(np.full((m, n), np.nan, "float32"))
        f(tvm.nd.array(a), tvm.nd.array(b), c)
        np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_topi_templates_found_after_import_tvmpy_alone():
    code = ("import tvmpy\nfrom tvmpy import autotvm\n"
            "t = autotvm.task.create('gemm.x86', (32, 32, 32, 'float32'), 'llvm')\n"
            "print(len(t.config_space))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) > 1
