"""Kernels of the dynamic operators whose shape-like arguments are run-time tensors, one module
per module of ``relay.op.dyn`` (their computes):

- ``transform``: ``dyn_reshape`` (also squeeze / expand_dims), ``dyn_broadcast_to``, ``dyn_tile``,
  ``dyn_full``, ``dyn_arange``, ``dyn_strided_slice``, ``dyn_split``, ``dyn_one_hot``,
  ``dyn_topk``;
- ``nn``: ``dyn_pad``;
- ``image``: ``dyn_resize``;
- ``shape``: ``shape_of``;
- ``reduce``: reductions over axes given as a tensor (``dyn_reduce``);
- ``scalar_args``: operators with a run-time scalar argument (``dyn_trilu``, ``dyn_scan``);
- ``signal``: DFT / STFT along a run-time axis (``dyn_dft``, ``dyn_stft``);
- ``spatial``: ``dyn_affine_grid``, ``dyn_col2im``, ``dyn_max_unpool``.
"""
