"""TVM's ``tvm.contrib.debugger``: the graph executor with per-node timing."""
