"""Alias left for one importer: tests/e2e/util.py (owned by the e2e engineer this session) reads
``simplify`` from here. te itself uses :mod:`tvmpy.arith` directly; delete this module once that
import moves to ``tvmpy.arith``."""

from __future__ import annotations

from ..arith import simplify

__all__ = ["simplify"]
