"""Zoo models with the matmul / attention register tile at 8 rows (``tile_rows`` as before
2026-11-30: one 512-bit FMA unit assumed) and at the default of this host (12 rows on AVX-512
cores with two FMA units), both builds and onnxruntime in one process, interleaved rounds
(bench/common.interleaved_samples) timed in process CPU time at 1 thread, wall time at more
(``--threads``), inputs fed and outputs fetched on every side.

    PYTHONPATH=. python bench/gemm_tile_zoo.py [--models bert,t5_encoder,...] [--rounds 9] \
        [--threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
_THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
os.environ["TVM_NUM_THREADS"] = str(_THREADS)  # (read once, at the runtime's first use)
os.environ.setdefault("TVMPY_CACHE", "0")
from common import ensure_native_blas, zoo_switch_ab  # noqa: E402

ensure_native_blas()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bert,t5_encoder,vit")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1, help="1: CPU time; more: wall time")
    args = ap.parse_args()
    import tvmpy.topi.x86.dense as dense

    @contextlib.contextmanager
    def rows8():  # one 512-bit FMA unit assumed: 8-row tiles
        default = dense._fma512_units
        dense._fma512_units = lambda: 1  # type: ignore[assignment]
        try:
            yield
        finally:
            dense._fma512_units = default  # type: ignore[assignment]

    zoo_switch_ab(args.models.split(","), {"8": rows8, "default": contextlib.nullcontext},
                  args.rounds, args.threads)


if __name__ == "__main__":
    main()
