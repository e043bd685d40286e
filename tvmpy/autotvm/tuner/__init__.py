"""Tuners: search strategies over a task's config space, and their callbacks.

``Tuner`` (the tune loop), ``RandomTuner``, ``GridSearchTuner`` (``range_idx``), ``GATuner``,
``XGBTuner`` (cost-model guided);
``callback.log_to_file`` and ``callback.progress_bar``. See :mod:`.tuner` for resuming a run
from its log and for injecting a custom measure function.
"""

from . import callback
from .ga_tuner import GATuner
from .gridsearch_tuner import GridSearchTuner
from .random_tuner import RandomTuner
from .tuner import Tuner
from .xgboost_tuner import XGBTuner

__all__ = ["Tuner", "RandomTuner", "GridSearchTuner", "GATuner", "XGBTuner", "callback"]
