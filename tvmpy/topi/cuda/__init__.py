"""GPU schedules (TVM's ``topi.cuda``: used for every target with the key "gpu", OpenCL and CUDA).

``injective.py``: fused elementwise chains, one thread per output; ``reduction.py``: reductions
(cross-thread when the reduced extent is long), softmax, layer_norm and pooling; ``fallback.py``:
the plain one-thread-per-output schedule of any other operator (conv2d, dense, ... until a
tuned template replaces it)."""

from .fallback import schedule_fallback  # noqa: F401
from .injective import schedule_broadcast, schedule_elemwise, schedule_injective  # noqa: F401
from .reduction import (  # noqa: F401
    schedule_layer_norm,
    schedule_pool,
    schedule_reduce,
    schedule_softmax,
)
