"""AutoTVM: tuning templates, configuration spaces, measurement, tuners and logs.

``from tvmpy import autotvm``: ``@autotvm.template``, ``autotvm.get_config()``,
``autotvm.task.create``, ``autotvm.apply_history_best(log)``, ``autotvm.record``.
"""

from . import feature, measure, record, space, task, tuner  # noqa: F401
from .env import GLOBAL_SCOPE  # noqa: F401
from .measure import (  # noqa: F401
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    RPCRunner,
    measure_option,
)
from .space import ConfigEntity, ConfigSpace, FallbackConfigEntity  # noqa: F401
from .task import (  # noqa: F401
    ApplyConfig,
    ApplyGraphBest,
    ApplyHistoryBest,
    DispatchContext,
    FallbackContext,
    apply_graph_best,
    apply_history_best,
    get_config,
    register_topi_compute,
    register_topi_schedule,
    template,
)
from .tune_model import tune_model, tune_tasks  # noqa: F401
from .tuner import callback  # noqa: F401


def __getattr__(name: str) -> object:
    # TVM's ``autotvm.graph_tuner``: it reads relay graphs (a higher layer), so it loads on
    # first use; nothing in autotvm itself depends on it
    if name == "graph_tuner":
        import importlib

        return importlib.import_module("tvmpy.autotvm.graph_tuner")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
