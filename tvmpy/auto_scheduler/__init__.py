"""Template-free auto-scheduling (TVM's ``tvm.auto_scheduler``, Ansor's design).

A compute (``ComputeDAG``) is scheduled by a :class:`State`: a history of transform steps
(split, fuse, reorder, compute_at, ...) that replays on a fresh schedule and serializes to a
log record. Sketch rules generate the search space from the compute itself; random annotation
fills it; a search policy measures candidates and ``RecordToFile`` logs them.
"""

from . import cost_model  # noqa: F401,E402
from .compute_dag import ComputeDAG  # noqa: F401
from .cost_model import RandomModel, XGBModel  # noqa: F401
from .dispatcher import ApplyHistoryBest, ApplyHistoryBestOrSample, DispatchContext  # noqa: F401
from .loop_state import Iterator, Stage, State  # noqa: F401
from .measure import LocalBuilder, LocalRunner, MeasureInput, MeasureResult  # noqa: F401
from .measure_record import (  # noqa: F401
    RecordReader,
    RecordToFile,
    load_best_record,
    load_records,
    save_records,
)
from .relay_integration import extract_tasks, is_auto_scheduler_enabled  # noqa: F401
from .search_policy import EmptyPolicy, RandomSearch, SketchPolicy  # noqa: F401
from .search_task import HardwareParams, SearchTask, TuningOptions  # noqa: F401
from .sketch_policy import generate_sketches, sample_initial_population  # noqa: F401
from .task_scheduler import LogEstimatedLatency, PrintTableInfo, TaskScheduler  # noqa: F401
from .workload_registry import make_workload_key, register_workload  # noqa: F401
