"""Docstrings that stay true (issue 30, point 4).

- Every repository path a docstring cites exists. A path is read relative to the repository
  root, to the package (``tvmpy/``) or to any folder above the citing file (``onnx/<module>`` from
  a module of ``relay/frontend/pytorch``),
  so the short forms the docstrings use resolve; a path cited as Apache TVM's (``TVM`` within
  the sentence before it) names TVM's tree, not ours, and is not checked, nor is a path in
  another installed package (``torch/...``); ``PLACEHOLDERS`` are
  examples of a form (``bench/x.py``) or files a run writes (DUMP_IR's ``graph/00_graph.json``).
- Every pass module of ``relay.transform`` and ``tir.transform`` states what it does, when it is
  valid, and a before/after example.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|txt|json|sh|toml|cfg|c|cc|h))\b")
PLACEHOLDERS = {"bench/x.py", "tests/fuzz/test_x.py", "graph/00_graph.json",
                "relay/op/strategy/mytarget.py"}
#: modules of the pass packages that hold no pass (helpers, the pass kinds, the package itself)
NOT_PASSES = {"__init__.py", "common.py", "function_pass.py", "pass_infra.py", "layout_rules.py",
              "layout_demand.py", "layout_rewrite.py"}
PASS_PACKAGES = ("tvmpy/relay/transform", "tvmpy/tir/transform")


def _python_files() -> list[str]:
    out = []
    for top in ("tvmpy", "bench", "tests"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            out += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return sorted(out)


def _docstrings(path: str) -> list[tuple[int, str]]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return [(getattr(n, "lineno", 1), d) for n in ast.walk(tree) if isinstance(n, kinds)
            and (d := ast.get_docstring(n, clean=False))]


def _resolves(cited: str, citing: str) -> bool:
    if any(os.path.exists(os.path.join(ROOT, base, cited)) for base in ("", "tvmpy")):
        return True
    folder = os.path.dirname(citing)
    while True:
        if os.path.exists(os.path.join(folder, cited)):
            return True
        if os.path.samefile(folder, ROOT) or folder == os.path.dirname(folder):
            return False
        folder = os.path.dirname(folder)


def _another_package(cited: str) -> bool:
    """A path inside an installed package other than ours (``torch/_decomp/...``)."""
    top = cited.split("/")[0]
    return top.isidentifier() and top != "tvmpy" and importlib.util.find_spec(top) is not None


def dangling_paths(files: list[str]) -> list[str]:
    bad = []
    for path in files:
        for line, doc in _docstrings(path):
            for m in PATH.finditer(doc):
                cited = m.group(1)
                if cited in PLACEHOLDERS or "TVM" in doc[max(0, m.start() - 120):m.start()]:
                    continue
                if not _resolves(cited, path) and not _another_package(cited):
                    bad.append(f"{os.path.relpath(path, ROOT)}:{line}: {cited}")
    return bad


def test_every_path_a_docstring_cites_exists():
    bad = dangling_paths(_python_files())
    assert not bad, "docstrings cite paths that do not exist:\n" + "\n".join(bad)


def test_the_check_finds_a_dangling_path(tmp_path):
    stale = tmp_path / "stale.py"
    stale.write_text('"""See tvmpy/relay/no_such_module.py and tvmpy/relay/build_module.py."""\n')
    tvm_ref = tmp_path / "tvm_ref.py"
    tvm_ref.write_text('"""As TVM\'s ``src/relay/transforms/fuse_ops.cc`` does."""\n')
    assert [b.split(": ")[-1] for b in dangling_paths([str(stale), str(tvm_ref)])] == [
        "tvmpy/relay/no_such_module.py"]


#: pass modules outside the two packages
OTHER_PASSES = ("tvmpy/relay/qnn/transform.py", "tvmpy/relay/qnn/fake_quantization_to_integer.py")


def _pass_modules() -> list[str]:
    return sorted([f"{pkg}/{f}" for pkg in PASS_PACKAGES for f in os.listdir(os.path.join(ROOT, pkg))
                   if f.endswith(".py") and f not in NOT_PASSES] + list(OTHER_PASSES))


@pytest.mark.parametrize("module", _pass_modules())
def test_pass_module_states_what_when_and_an_example(module):
    with open(os.path.join(ROOT, module), encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    lines = doc.split("\n")
    for heading in ("What it does", "When valid", "Example"):
        assert any(line.startswith(heading) for line in lines), f"{module}: no '{heading}'"
    example = "\n".join(lines[next(i for i, x in enumerate(lines) if x.startswith("Example")):])
    assert re.search(r"^\s+before:", example, re.M) and re.search(r"^\s+after:", example, re.M), \
        f"{module}: the Example needs a 'before:' and an 'after:' line"
