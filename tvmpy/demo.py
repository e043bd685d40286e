"""``python -m tvmpy.demo [options]``: the same as ``tvmpy demo [options]`` (see tvmpy/cli/demo.py).

Builds the built-in ResNet-18 (random weights) with relay.build, checks its output against
onnxruntime and prints the latency table of tvmpy at opt_level 0 and 3 beside onnxruntime and
eager PyTorch. The earlier GEMM tour lives on as ``python bench/gemm.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .cli import main as _cli_main


def main(argv: Sequence[str] | None = None) -> int:
    return _cli_main(["demo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
