"""x86's few-output-channel convolutions in NCHW (``x86_alter_op.few_output_channels``, the
default) against the blocked NCHW{c}c form (``NCHW_MAX_OC_FRACTION = 0``) in ONE process,
interleaved, with onnxruntime, on a zoo model at its real size (dcgan: its 128 -> 3 phases).

    python bench/few_channels_ab.py --model dcgan [--rounds 11] [--node-rounds 8]

Printed: see ``common.lowering_forms_ab``.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ensure_native_blas, lowering_forms_ab  # noqa: E402

ensure_native_blas()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="dcgan")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--node-rounds", type=int, default=8)
    args = ap.parse_args()

    import tvmpy.relay.op.strategy.x86_alter_op as xa
    from tvmpy.relay.testing import compare

    def form(fraction: int):
        def build(mod, params):
            default = xa.NCHW_MAX_OC_FRACTION
            xa.NCHW_MAX_OC_FRACTION = fraction
            try:
                lib, _ = compare.build(mod, params, opt_level=3)
            finally:
                xa.NCHW_MAX_OC_FRACTION = default
            return compare.tvm_runner(lib)
        return build

    lowering_forms_ab(args.model, {"nchw": form(xa.NCHW_MAX_OC_FRACTION), "blocked": form(0)},
                      args.rounds, args.node_rounds)


if __name__ == "__main__":
    main()
