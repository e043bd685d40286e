"""Target-dispatched functions (TVM's ``tvm.target.generic_func``).

``@generic_func`` turns a function into the default of a generic function; ``@f.register("cpu")``
adds the implementation for targets with that key. Calling ``f(...)`` runs the implementation
registered for the first of ``Target.current().keys`` that has one, else the default (also when
no target is current). A target's policy (layouts, algorithm choices) thereby lives in that
target's own files, and a new target adds files, not branches in shared code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from .target import Target

__all__ = ["GenericFunc", "generic_func"]


class GenericFunc:
    """A default implementation plus overrides by target key (see the module docstring)."""

    def __init__(self, fdefault: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fdefault)
        self.fdefault = fdefault
        self.dispatch_dict: dict[str, Callable[..., Any]] = {}

    def register(self, key: str | Sequence[str], func: Callable[..., Any] | None = None,
                 override: bool = False) -> Any:
        """Register ``func`` for target key(s) ``key``; a decorator when ``func`` is omitted.
        Registering a key twice is an error unless ``override``."""
        keys = [key] if isinstance(key, str) else list(key)

        def _do(f: Callable[..., Any]) -> Callable[..., Any]:
            for k in keys:
                if k in self.dispatch_dict and not override:
                    raise ValueError(f"{self.__name__}: key {k!r} is already registered")
                self.dispatch_dict[k] = f
            return f

        return _do if func is None else _do(func)

    def dispatch(self, target: Target | None) -> Callable[..., Any]:
        """The implementation for ``target`` (the default for None or no matching key)."""
        if target is not None:
            for k in target.keys:
                f = self.dispatch_dict.get(k)
                if f is not None:
                    return f
        return self.fdefault

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dispatch(Target.current())(*args, **kwargs)


def generic_func(fdefault: Callable[..., Any]) -> GenericFunc:
    """Decorate the default implementation of a target-dispatched function."""
    return GenericFunc(fdefault)
