"""The two lowerings of ``relay.transform.ConvTransposeToConv`` in ONE process, interleaved:
each phase's own padding (the default) against PassContext
``relay.ConvTransposeToConv.shared_padding`` (the input padded once, each phase a window copy
of it), with onnxruntime, on a zoo model at its real size.

    python bench/conv_transpose_ab.py --model dcgan [--rounds 11] [--node-rounds 8]

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

    import tvmpy.relay.transform.conv_transpose as ct
    from tvmpy.relay.testing import compare

    def form(shared: bool):
        def build(mod, params):
            lib, _ = compare.build(mod, params, opt_level=3,
                                   config={ct.SHARED_PADDING_KEY: shared})
            return compare.tvm_runner(lib)
        return build

    lowering_forms_ab(args.model, {"own_padding": form(False), "shared_padding": form(True)},
                      args.rounds, args.node_rounds)


if __name__ == "__main__":
    main()
