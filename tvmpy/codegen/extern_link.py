"""Object code for external functions that generated code calls (``call_extern``).

A library of hand-written kernels (e.g. the tensorize micro-kernels of
:mod:`tvmpy.contrib.microkernel`, above the code generators) registers, for each symbol it defines, a provider returning a
relocatable object file. Code generators call :func:`extern_modules` with the functions they
compile: every registered symbol those functions call is linked into the built module (as an
imported module), so the library ``export_library`` writes is self-contained. A provider that
takes one argument receives the Target being compiled for (and must return an object for its
architecture, e.g. cross-compiled for ``-mtriple=aarch64-linux-gnu``); one that takes none is
called only for targets of this machine's architecture.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..runtime.module import Module
from ..target.cpu_features import host_cpu_name, host_feature_string, requirement
from ..tir import expr as E
from ..tir.functor import post_order_visit

__all__ = ["register_extern_object", "extern_symbols", "extern_modules", "extern_modules_for"]

# symbol -> (provider key, provider); one provider may define several symbols
_PROVIDERS: dict[str, tuple[str, Callable[..., bytes]]] = {}


def register_extern_object(symbols: Iterable[str], key: str,
                           provider: Callable[..., bytes]) -> None:
    """Declare that ``provider()`` returns an ELF object (-fPIC) defining ``symbols``; ``key``
    names the object (one object is linked once even when several of its symbols are called)."""
    for s in symbols:
        _PROVIDERS[s] = (key, provider)


def extern_symbols(funcs: Sequence[Any]) -> list[str]:
    """Names of the external functions called by ``funcs`` (PrimFuncs), first-seen order."""
    names: dict[str, None] = {}

    def visit(n: Any) -> None:
        if isinstance(n, E.Call) and n.op in ("call_extern", "call_pure_extern") and n.args:
            if isinstance(n.args[0], E.StringImm):
                names.setdefault(n.args[0].value, None)

    for f in funcs:
        post_order_visit(f.body, visit)
    return list(names)


def _takes_target(provider: Callable[..., bytes]) -> bool:
    try:
        params = inspect.signature(provider).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
               for p in params)


def extern_modules(funcs: Sequence[Any], target: Any = None) -> list[Any]:
    """Runtime Modules (object code only, no functions of their own) defining the registered
    external symbols that ``funcs`` call, built for ``target`` (a Target; None: this machine);
    pass them as ``imports`` to ``Module.from_objects``."""
    return extern_modules_for(extern_symbols(funcs), target)


def extern_modules_for(symbols: Iterable[str], target: Any = None) -> list[Any]:
    """:func:`extern_modules` from the called symbols' names (as ``extern_symbols`` lists
    them)."""
    objects: dict[str, bytes] = {}
    foreign = target is not None and getattr(target, "is_foreign", False)
    for name in dict.fromkeys(symbols):
        hit = _PROVIDERS.get(name)
        if hit is not None and hit[0] not in objects:
            if _takes_target(hit[1]):
                objects[hit[0]] = hit[1](target)
            elif foreign:
                raise RuntimeError(f"external kernel {name} ({hit[0]}) is only available for "
                                   f"this machine, not for target {target}")
            else:
                objects[hit[0]] = hit[1]()
    meta: dict = {"version": 1, "entry": "", "functions": []}
    if objects and not foreign:  # compiled for this machine (-march=native): its features
        meta["cpu"] = requirement(None, host_cpu_name(), host_feature_string())
    return [Module(None, dict(meta), "c", [obj]) for obj in objects.values()]
