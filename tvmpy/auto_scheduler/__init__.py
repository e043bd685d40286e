"""Template-free auto-scheduling (TVM's ``tvm.auto_scheduler``, Ansor's design).

A compute (``ComputeDAG``) is scheduled by a :class:`State`: a history of transform steps
(split, fuse, reorder, compute_at, ...) that replays on a fresh schedule and serializes to a
log record. Sketch rules generate the search space from the compute itself; random annotation
fills it; a search policy measures candidates and ``RecordToFile`` logs them.
"""

from .compute_dag import ComputeDAG  # noqa: F401
from .loop_state import Iterator, Stage, State  # noqa: F401
from .measure import LocalBuilder, LocalRunner, MeasureInput, MeasureResult  # noqa: F401
from .measure_record import (  # noqa: F401
    RecordReader,
    RecordToFile,
    load_best_record,
    load_records,
    save_records,
)
from .search_policy import RandomSearch  # noqa: F401
from .search_task import HardwareParams, SearchTask, TuningOptions  # noqa: F401
from .sketch_policy import SketchPolicy, generate_sketches, sample_initial_population  # noqa: F401
from .workload_registry import make_workload_key, register_workload  # noqa: F401
