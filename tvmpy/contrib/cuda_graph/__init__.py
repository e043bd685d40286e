"""``tvm.contrib.cuda_graph``: the graph executor replaying CUDA graphs
(:mod:`.cuda_graph_executor`)."""
