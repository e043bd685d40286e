"""pytest plugin for :mod:`tvmpy.testing`, as TVM's ``tvm.testing.plugin``.

Load it from a ``conftest.py`` with ``pytest_plugins = ["tvmpy.testing.plugin"]`` (a top-level
conftest; a conftest deeper in a tree may ``from tvmpy.testing.plugin import *`` instead, which
limits it to that folder). It then:

- parametrizes every test taking a ``target`` argument over the test targets
  (``TVM_TEST_TARGETS`` or the default list, less ``@exclude_targets``) unless the test names
  its own (``@parametrize_targets("llvm")`` / ``pytest.mark.parametrize("target", ...)``); each
  target that cannot run here is skipped with the reason, ``@known_failing_targets`` kinds are
  xfail;
- gives the ``dev`` fixture: ``tvm.device(target)``;
- parametrizes jointly the fixtures of one ``tvm.testing.parameters`` call;
- counts the tests using each ``fixture(cache_return_value=True)`` so its cache is freed after
  the last;
- registers the marks (``gpu``, ``cuda``, ``opencl``, ``llvm``, ...) and prints the enabled
  targets in the session header.
"""

from __future__ import annotations

from typing import Any

import pytest

from . import utils

__all__ = ["pytest_configure", "pytest_report_header", "pytest_generate_tests",
           "pytest_collection_modifyitems", "dev"]

MARKERS = {
    "gpu": "mark a test as using a gpu",
    "cuda": "mark a test as requiring cuda",
    "nvptx": "mark a test as requiring nvptx",
    "opencl": "mark a test as requiring opencl",
    "vulkan": "mark a test as requiring vulkan",
    "llvm": "mark a test as requiring llvm",
}


def pytest_configure(config: Any) -> None:
    for name, desc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {desc}")


def pytest_report_header(config: Any) -> str:
    return "enabled targets: " + "; ".join(t for t, _ in utils.enabled_targets())


def pytest_generate_tests(metafunc: Any) -> None:
    _parametrize_correlated_parameters(metafunc)
    _auto_parametrize_target(metafunc)
    _add_target_specific_marks(metafunc)


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    _count_num_fixture_uses(items)


@pytest.fixture
def dev(target: Any) -> Any:
    """The device of the test's ``target``."""
    from ..runtime import device

    return device(utils._kind(target))


def _parametrized_names(metafunc: Any) -> list[str]:
    names = []
    for mark in metafunc.definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if isinstance(argnames, str):
            names += [a.strip() for a in argnames.split(",")]
        else:
            names += list(argnames)
    return names


def _auto_parametrize_target(metafunc: Any) -> None:
    if "target" not in metafunc.fixturenames or "target" in _parametrized_names(metafunc):
        return
    excluded = getattr(metafunc.function, "tvm_excluded_targets", ())
    targets = [t["target"] for t in utils._get_targets() if t["target_kind"] not in excluded]
    # a mark rather than metafunc.parametrize, so that _add_target_specific_marks sees it
    metafunc.definition.add_marker(pytest.mark.parametrize("target", targets, scope="session"))


def _add_target_specific_marks(metafunc: Any) -> None:
    if "target" not in metafunc.fixturenames:
        return
    xfail_kinds = getattr(metafunc.function, "tvm_known_failing_targets", ())
    for mark in metafunc.definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        names = ([a.strip() for a in argnames.split(",") if a.strip()]
                 if isinstance(argnames, str) else list(argnames))
        if "target" not in names:
            continue
        i = names.index("target")
        argvalues = mark.args[1] if len(mark.args) > 1 else mark.kwargs["argvalues"]
        if not isinstance(argvalues, list):
            raise TypeError(f"{metafunc.function.__name__}: parametrize over 'target' with a "
                            "list of values, not a tuple (the plugin adds marks in place)")
        new = []
        for v in argvalues:
            if isinstance(v, type(pytest.param(None))):
                values, marks, pid = tuple(v.values), list(v.marks), v.id
            else:
                values = (v,) if len(names) == 1 else tuple(v)
                marks, pid = [], None
            target = values[i]
            marks += utils._target_requirements(target)
            if utils._kind(target) in xfail_kinds:
                marks.append(pytest.mark.xfail(
                    reason=f'known failing test for target "{utils._kind(target)}"'))
            new.append(pytest.param(*values, marks=marks, id=pid))
        argvalues[:] = new


def _parametrize_correlated_parameters(metafunc: Any) -> None:
    groups: dict[int, dict[str, Any]] = {}
    for name, defs in metafunc.definition._fixtureinfo.name2fixturedefs.items():
        func = defs[-1].func
        if hasattr(func, "parametrize_group"):
            g = groups.setdefault(func.parametrize_group, {"ids": func.parametrize_ids,
                                                           "params": []})
            g["params"].append((name, func.parametrize_values))
    for g in groups.values():
        names = [n for n, _ in g["params"]]
        if len(names) == 1:
            metafunc.parametrize(names[0], g["params"][0][1], indirect=True, ids=g["ids"])
        else:
            sets = list(zip(*[v for _, v in g["params"]]))
            metafunc.parametrize(",".join(names), sets, indirect=True, ids=g["ids"])


def _count_num_fixture_uses(items: list[Any]) -> None:
    for item in items:
        if item.get_closest_marker("skip") or any(
                m.args and m.args[0] for m in item.iter_markers("skipif")):
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for defs in info.name2fixturedefs.values():
            counter = getattr(defs[-1].func, "num_tests_use_this_fixture", None)
            if counter is not None:
                counter[0] += 1
