"""Pass instruments (TVM's ``tvm.ir.instrument``, also ``tvm.instrument``): objects a
``PassContext(instruments=[...])`` calls around every pass run inside it.

An instrument has any of five methods (the :class:`PassInstrument` base gives no-op ones):
``enter_pass_ctx()`` / ``exit_pass_ctx()`` when the context is entered / left (or its
instruments replaced, ``PassContext.override_instruments``), ``should_run(mod, info)`` (False
skips the pass: every instrument is asked, a pass in ``required_pass`` is never skipped),
``run_before_pass(mod, info)`` and ``run_after_pass(mod, info)``. ``info`` is the pass's
``PassInfo`` (``name``, ``opt_level``, ``required``). The calling protocol, with TVM's error
semantics, is in :mod:`tvmpy.transform.context` and :mod:`tvmpy.transform.passes`.

``@pass_instrument`` on a plain class makes it a PassInstrument subclass (its constructor
arguments pass through). ``PassTimingInstrument`` records each pass's wall time as a tree
(a Sequential's passes under it); ``render()`` prints it, one line per pass:
``<name>: <total>us [<self>us] (<% of all>; <% of parent>)``, children indented by a tab.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from typing import Any, cast

__all__ = ["PassInstrument", "pass_instrument", "PassTimingInstrument", "PrintBeforeAll",
           "PrintAfterAll", "PassPrintingInstrument"]

_LOG = logging.getLogger("tvmpy.transform")


class PassInstrument:
    """Base class of pass instruments: subclass it (calling ``PassInstrument.__init__``) or
    decorate a plain class with :func:`pass_instrument`; override the methods you need."""

    def __init__(self) -> None:
        pass

    @property
    def name(self) -> str:
        return type(self).__name__

    def enter_pass_ctx(self) -> None:
        """Called when the PassContext holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when that PassContext is left."""

    def should_run(self, mod: Any, info: Any) -> bool:
        """Whether the pass ``info`` runs on ``mod`` (False skips it)."""
        return True

    def run_before_pass(self, mod: Any, info: Any) -> None:
        """Called before each pass that runs, with its input module."""

    def run_after_pass(self, mod: Any, info: Any) -> None:
        """Called after each pass that ran, with its output module."""


def _wrap_class(cls: type) -> type:
    if issubclass(cls, PassInstrument):
        return cls

    user_init: Any = cast(Any, cls).__init__

    class Wrapped(cls, PassInstrument):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            user_init(self, *args, **kwargs)
            PassInstrument.__init__(self)

    functools.update_wrapper(Wrapped.__init__, user_init)
    Wrapped.__name__ = cls.__name__
    Wrapped.__qualname__ = cls.__qualname__
    Wrapped.__doc__ = cls.__doc__
    Wrapped.__module__ = cls.__module__
    return Wrapped


def pass_instrument(pi_cls: Any = None) -> Any:
    """``@tvm.instrument.pass_instrument`` on a class: the class as a PassInstrument (its
    instances go in ``PassContext(instruments=[...])``); also ``pass_instrument()(cls)``."""

    def create(arg: Any) -> type:
        if not inspect.isclass(arg):
            raise TypeError(f"pass_instrument decorates a class, got {arg!r}")
        return _wrap_class(arg)

    return create(pi_cls) if pi_cls is not None else create


# -- timing ------------------------------------------------------------------------------------
class _Profile:
    __slots__ = ("name", "start", "duration", "children")

    def __init__(self, name: str) -> None:
        self.name = name
        self.start = time.perf_counter()
        self.duration = 0.0
        self.children: list[_Profile] = []


class _Profiles(threading.local):
    """Per thread, as TVM's: the finished top-level passes and the stack of running ones."""

    def __init__(self) -> None:
        self.root = _Profile("root")
        self.stack: list[_Profile] = []


_PROFILES = _Profiles()


class PassTimingInstrument(PassInstrument):
    """Times every pass run in its context (nested passes as children of the pass that ran
    them); ``render()`` gives the tree as text. The records are per thread and cleared when
    the context exits, so render inside the ``with``."""

    def run_before_pass(self, mod: Any, info: Any) -> None:
        parent = _PROFILES.stack[-1] if _PROFILES.stack else _PROFILES.root
        prof = _Profile(info.name)
        parent.children.append(prof)
        _PROFILES.stack.append(prof)

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if not _PROFILES.stack:
            raise RuntimeError("PassTimingInstrument: run_after_pass without run_before_pass")
        prof = _PROFILES.stack.pop()
        prof.duration = time.perf_counter() - prof.start

    def exit_pass_ctx(self) -> None:
        _PROFILES.root.children.clear()
        _PROFILES.stack.clear()

    @staticmethod
    def render() -> str:
        """The timing tree of the passes run so far in this thread's instrumented context
        ("" and a warning when none ran)."""
        if _PROFILES.stack:
            raise RuntimeError("PassTimingInstrument.render: a pass is still running "
                               f"({_PROFILES.stack[-1].name})")
        top = _PROFILES.root.children
        if not top:
            _LOG.warning("no passes have been profiled: is a PassTimingInstrument in the "
                         "current PassContext's instruments?")
            return ""
        total = sum(p.duration for p in top) or 1e-12
        lines: list[str] = []

        def emit(p: _Profile, depth: int, parent: float) -> None:
            own = p.duration - sum(c.duration for c in p.children)
            lines.append(f"{chr(9) * depth}{p.name}: {p.duration * 1e6:.0f}us [{own * 1e6:.0f}us] "
                         f"({100 * p.duration / total:.2f}%; "
                         f"{100 * p.duration / (parent or 1e-12):.2f}%)")
            for c in p.children:
                emit(c, depth + 1, p.duration)

        for p in top:
            emit(p, 0, total)
        return "\n".join(lines) + "\n"


# -- printing ----------------------------------------------------------------------------------
class PrintBeforeAll(PassInstrument):
    """Prints the pass's info and its input module before every pass."""

    def run_before_pass(self, mod: Any, info: Any) -> None:
        print(f"Before Running Pass: {info}")
        print(mod)


class PrintAfterAll(PassInstrument):
    """Prints the pass's info and its output module after every pass."""

    def run_after_pass(self, mod: Any, info: Any) -> None:
        print(f"After Running Pass: {info}")
        print(mod)


class PassPrintingInstrument(PassInstrument):
    """Prints the module before the passes named in ``print_before_pass_names`` and after
    those named in ``print_after_pass_names``."""

    def __init__(self, print_before_pass_names: list[str],
                 print_after_pass_names: list[str]) -> None:
        super().__init__()
        self.print_before_pass_names = list(print_before_pass_names)
        self.print_after_pass_names = list(print_after_pass_names)

    def run_before_pass(self, mod: Any, info: Any) -> None:
        if info.name in self.print_before_pass_names:
            print(f"Print IR before: {info.name}\n{mod}\n\n")

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if info.name in self.print_after_pass_names:
            print(f"Print IR after: {info.name}\n{mod}\n\n")
