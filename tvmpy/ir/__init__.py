"""IR foundations shared by every layer: dtypes (``dtype``) and immutable nodes with structural
equality (``node``). Kept apart from ``tir`` so that dtype parsing imports nothing else."""
