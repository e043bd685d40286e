"""AutoTVM: tuning templates, configuration spaces, measurement, tuners and logs.

``from tvmpy import autotvm``: ``@autotvm.template``, ``autotvm.get_config()``,
``autotvm.task.create``, ``autotvm.apply_history_best(log)``, ``autotvm.record``.
"""

from . import feature, record, space, task, tuner  # noqa: F401
from .space import ConfigEntity, ConfigSpace, FallbackConfigEntity  # noqa: F401
from .task import (  # noqa: F401
    ApplyConfig,
    ApplyHistoryBest,
    DispatchContext,
    FallbackContext,
    apply_history_best,
    get_config,
    template,
)
from .tuner import callback  # noqa: F401
