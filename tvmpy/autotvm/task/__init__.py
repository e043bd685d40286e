"""Tuning tasks, templates and dispatch contexts (TVM's ``autotvm.task``)."""

from ..space import ConfigEntity, ConfigSpace, FallbackConfigEntity, InstantiationError  # noqa: F401
from . import space  # noqa: F401
from .dispatcher import (  # noqa: F401
    ApplyConfig,
    ApplyHistoryBest,
    DispatchContext,
    FallbackContext,
    apply_history_best,
    clear_fallback_cache,
    fallback_summary,
)
from .graph_best import ApplyGraphBest, apply_graph_best  # noqa: F401
from .relay_integration import extract_from_multiple_program, extract_from_program  # noqa: F401
from .task import (  # noqa: F401
    TASK_TABLE,
    Task,
    TemplateNotFoundError,
    args_to_workload,
    compute_flop,
    create,
    deserialize_args,
    get_config,
    serialize_args,
    template,
)
from .topi_integration import (  # noqa: F401
    TaskExtractEnv,
    get_workload,
    register_topi_compute,
    register_topi_schedule,
)
