"""Imports go one way: down the layer order of docs/ARCHITECTURE.md.

Every module of the package is parsed with ``ast``; every import in it (module level, inside
functions, ``if TYPE_CHECKING:`` blocks, relative or absolute, and ``importlib.import_module``
with a string literal) is an edge. A module belongs to the layer of the longest prefix that
names it in the table; an edge into a higher layer fails the test, which lists every such edge
as ``file:line -> module``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tvmpy"
DOC = ROOT / "docs" / "ARCHITECTURE.md"

# Edges that climb on purpose, each with its reason. Keep this short: fix the cause instead.
ALLOWED: dict[tuple[str, str], str] = {
    # TVM's spelling ``tvm.ir.Range``: Range is built from tir expressions, so ir re-exports it
    # on first use (module __getattr__); nothing in ir itself depends on it.
    ("tvmpy.ir", "tvmpy.tir.expr"): "public re-export",
    # TVM's spelling ``autotvm.graph_tuner``: it reads relay graphs, so it sits above relay and
    # autotvm loads it on first attribute use (module __getattr__); nothing in autotvm uses it
    ("tvmpy.autotvm", "tvmpy.autotvm.graph_tuner"): "public re-export",
    # TVM's spelling ``vta.top.graph_pack``: a relay pass, above relay; vta.top loads it on
    # first attribute use (module __getattr__)
    ("tvmpy.vta.top", "tvmpy.vta.top.graphpack"): "public re-export",
    # TVM's spelling ``tvm.ir.register_intrin_lowering``: the rule table lives with the targets
    # (target.intrin.RULES, read by LowerIntrin); ir re-exports the function on first use.
    ("tvmpy.ir", "tvmpy.target.intrin"): "public re-export",
    ("tvmpy.ir.op", "tvmpy.target.intrin"): "public re-export",
    # The VM runs relay operators' host functions by name: data-dependent shape functions, the
    # numpy implementations of run-time builtins (lists) and of calls whose compute refused
    # their shapes, typed with relay's types. Compiled shape functions (TVM's design) would
    # remove these three edges.
    ("tvmpy.runtime.vm", "tvmpy.relay.op.registry"): "the VM looks up operators by name",
    ("tvmpy.runtime.vm", "tvmpy.relay.op.shape_func"): "host shape functions",
    ("tvmpy.runtime.vm", "tvmpy.relay.ty"): "types for numpy implementations",
    # TVM's ``tvm.runtime.convert(1024)`` gives a tir.IntImm (and passes IR nodes through):
    # the IR is imported on the first such call only (the runtime alone has no IR)
    ("tvmpy.runtime.packed_func", "tvmpy.ir.node"): "tvm.runtime.convert passes IR nodes",
    ("tvmpy.runtime.packed_func", "tvmpy.tir.expr"): "tvm.runtime.convert(number) -> IntImm",
}

# Imports whose module name is computed (``importlib.import_module(<expression>)``) cannot be
# placed in the table; each one is listed here with what it loads, so none appears unnoticed.
COMPUTED_IMPORTS: dict[str, str] = {
    # ``tvm.tir.transform`` / ``tvm.tir.analysis``: tir's own sub-modules on first attribute use
    "tvmpy.tir": "tir's passes, pipeline, analysis and interpreter (TVM's spellings)",
    # printers registered as "module:function" strings by the layer that defines the nodes
    "tvmpy.ir.node": "a printer registered by a higher layer (register_printer)",
    # ``<op>.<family>`` templates: the operator library's ``topi.<family>`` package on first
    # lookup of an unregistered name, so ``autotvm.task.create("gemm.x86", ...)`` works after
    # ``import tvmpy`` alone (TVM's naming convention; nothing else in autotvm imports topi)
    "tvmpy.autotvm.task.task": "tvmpy.topi.<family> for an unregistered <op>.<family> template",
    # the builder process imports the module that registered the task's template
    "tvmpy.autotvm.measure.local_builder": "the module that defined the task's template",
    # a record names a workload that a higher layer registers on import (the rnn cell of
    # tvmpy.topi.rnn): the registry imports that module on a miss (WORKLOAD_MODULES)
    "tvmpy.auto_scheduler.workload_registry": "WORKLOAD_MODULES: the module registering a workload",
    # packages whose names load on first attribute use (their own modules, same layer or the
    # facade's sub-packages): ``tvm.te``, ``tvm.ir.IRModule``, ``te.<name>``, ``topi.x86``
    "tvmpy": "its sub-packages (lazy facade)",
    "tvmpy.ir": "ir's own modules (node, expr, function, module)",
    "tvmpy.te": "te's own modules",
    "tvmpy.topi": "topi's own sub-packages",
    "tvmpy.contrib": "contrib's own modules (``tvm.contrib.cc`` without an explicit import)",
    # a device's server imports the package that registers what its sessions need
    # (``--device vta``: tvmpy.vta's module loader), named in server.DEVICE_MODULES
    "tvmpy.rpc.server": "server.DEVICE_MODULES: the package a device's server needs (tvmpy.vta)",
    # a GPU device type's runtime module (same package), named in gpu_module.DEVICE_MODULES
    "tvmpy.runtime.gpu_module": "gpu_module.DEVICE_MODULES: tvmpy.runtime's device API modules",
    # a GPU target kind's code generator (same package), named in codegen.GPU_CODEGENS
    "tvmpy.codegen": "codegen.GPU_CODEGENS: tvmpy.codegen's GPU code generator modules",
}


def layer_table() -> list[tuple[int, str, list[str]]]:
    """``(rank, name, module prefixes)`` rows of the table after ``<!-- layers -->``."""
    text = DOC.read_text()
    body = text.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows.append((int(cells[0]), cells[1], re.findall(r"`([\w.]+)`", cells[2])))
    return rows


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    p = ROOT.joinpath(*name.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def imports_of(path: Path) -> list[tuple[int, str]]:
    """``(line, imported module)`` for every import of the package in ``path``."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: list[tuple[int, str]] = []

    def resolve(name: str, anchor: str) -> str:
        level = len(name) - len(name.lstrip("."))
        if not level:
            return name
        base = anchor.split(".")
        base = base[:len(base) - (level - 1)]
        return ".".join(base + ([name[level:]] if name[level:] else []))

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = resolve("." * node.level + (node.module or ""), package)
            for a in node.names:  # ``from pkg import submodule`` is an edge to the submodule
                sub = f"{target}.{a.name}"
                out.append((node.lineno, sub if is_module(sub) else target))
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and ast.unparse(node.func) in ("importlib.import_module", "import_module")):
            name = node.args[0].value
            anchor = package
            if len(node.args) > 1 and ast.unparse(node.args[1]) == "__name__":
                anchor = mod
            out.append((node.lineno, resolve(name, anchor)))
    return sorted({(line, m) for line, m in out if m == PACKAGE or m.startswith(PACKAGE + ".")})


def computed_imports_of(path: Path) -> list[int]:
    """Lines of ``import_module(...)`` calls whose module name is not a string literal."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and node.args
                and ast.unparse(node.func) in ("importlib.import_module", "import_module",
                                               "__import__")
                and not (isinstance(node.args[0], ast.Constant)
                         and isinstance(node.args[0].value, str))):
            lines.append(node.lineno)
    return lines


def rank_of(module: str, prefixes: dict[str, int]) -> int | None:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        rank = prefixes.get(".".join(parts[:n]))
        if rank is not None:
            return rank
    return None


def _prefixes() -> dict[str, int]:
    prefixes: dict[str, int] = {}
    for rank, _, mods in layer_table():
        for m in mods:
            assert m not in prefixes, f"{m} is listed twice in the layer table"
            prefixes[m] = rank
    return prefixes


def test_layer_table_is_well_formed():
    rows = layer_table()
    assert [r[0] for r in rows] == list(range(len(rows))), "ranks must be 0, 1, 2, ... in order"
    assert all(r[2] for r in rows)
    prefixes = _prefixes()
    unplaced = [module_name(p) for p in sorted((ROOT / PACKAGE).rglob("*.py"))
                if rank_of(module_name(p), prefixes) is None]
    assert not unplaced, f"modules in no layer of docs/ARCHITECTURE.md: {unplaced}"


def test_imports_follow_the_layer_order():
    prefixes = _prefixes()
    names = {rank: name for rank, name, _ in layer_table()}
    bad, used = [], set()
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        src = module_name(path)
        src_rank = rank_of(src, prefixes)
        for line, dst in imports_of(path):
            dst_rank = rank_of(dst, prefixes)
            if dst_rank is None or src_rank is None or dst_rank <= src_rank:
                continue
            if (src, dst) in ALLOWED:
                used.add((src, dst))
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line} -> {dst}  "
                       f"({names[src_rank]} imports {names[dst_rank]})")
    assert not bad, "imports that climb the layer order:\n  " + "\n  ".join(bad)
    stale = set(ALLOWED) - used
    assert not stale, f"allow-list entries no longer needed: {sorted(stale)}"


def test_computed_imports_are_declared():
    found = {module_name(p): lines for p in sorted((ROOT / PACKAGE).rglob("*.py"))
             if (lines := computed_imports_of(p))}
    undeclared = {m: lines for m, lines in found.items() if m not in COMPUTED_IMPORTS}
    assert not undeclared, f"computed imports not declared in COMPUTED_IMPORTS: {undeclared}"
    stale = set(COMPUTED_IMPORTS) - set(found)
    assert not stale, f"COMPUTED_IMPORTS entries no longer needed: {sorted(stale)}"
