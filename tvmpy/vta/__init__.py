"""VTA, the paper's deep-learning accelerator, as a software model (``import tvmpy.vta as vta``).

The hardware half (layer "vta hardware" of docs/ARCHITECTURE.md, numpy only):
``vta.hw_config`` (the design point), ``vta.isa`` (instructions and micro-ops),
``vta.simulator`` (the behavioural simulator, ``vta.simulator.stats()``) and ``vta.runtime``
(the JIT command queue).
"""

from __future__ import annotations

from . import hw_config, isa, runtime, simulator

__all__ = ["hw_config", "isa", "runtime", "simulator"]
