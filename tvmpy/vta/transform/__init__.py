"""VTA lowering passes (TVM's ``vta.transform``), run by :func:`tvmpy.vta.lower` on flattened
loop IR, in order:

1. :func:`inject_dma_intrin` — stages under ``pragma_dma_copy`` become ``VTALoadBuffer2D`` /
   ``VTAStoreBuffer2D`` (2-D strided, padding recognised from the pad compute's condition);
2. :func:`inject_alu_intrin` — stages under ``pragma_alu`` become ALU micro-op pushes
   (min/max/add/shift, immediates);
3. :func:`inject_coproc_sync` — dependency tokens from the data flow (``VTADepPush/Pop``);
4. :func:`inject_virtual_thread` — ``cthread`` virtual threads into interleaved streams;
5. :func:`place_sram` — on-chip buffers get tile addresses (over-capacity is an error);
6. :func:`lift_uop_kernels` — micro-op pushes and their loops become micro-kernels
   (``vta.uop_kernel`` scopes, the outer two loops folded into the 2-level uop loop).
"""

from .lowering import (  # noqa: F401
    inject_alu_intrin,
    inject_coproc_sync,
    inject_dma_intrin,
    inject_virtual_thread,
    lift_uop_kernels,
    place_sram,
)
