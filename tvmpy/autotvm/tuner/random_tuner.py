"""RandomTuner: uniform sampling of the config space without replacement."""

from .index_based_tuner import RandomTuner

__all__ = ["RandomTuner"]
