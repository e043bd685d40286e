"""GridSearchTuner: the config space in index order."""

from .index_based_tuner import GridSearchTuner

__all__ = ["GridSearchTuner"]
