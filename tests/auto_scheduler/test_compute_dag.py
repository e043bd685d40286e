"""ComputeDAG analysis, workload keys and SearchTask."""

from __future__ import annotations

import json

import pytest
from as_workloads import conv2d_bias_relu, make_task, matmul, matmul_relu, softmax

from tvmpy import auto_scheduler, te
from tvmpy.auto_scheduler import ComputeDAG


def _info(dag, name):
    (k,) = [k for k, op in enumerate(dag.ops) if op.name == name]
    return dag.op_info[k]


def test_matmul_relu_analysis():
    dag = ComputeDAG(matmul_relu(8, 9, 10))
    assert [op.name for op in dag.ops] == ["A", "B", "C", "D"]
    c, d = _info(dag, "C"), _info(dag, "D")
    assert c.has_reduction and c.needs_multi_level_tiling and not c.is_injective
    assert not c.is_output and c.consumers == [3] and c.producers == [0, 1]
    assert d.is_elementwise and d.is_output and d.is_injective and not d.needs_multi_level_tiling
    assert _info(dag, "A").is_placeholder
    assert c.spatial_extents == [8, 9] and c.reduce_extents == [10]


def test_conv_and_softmax_analysis():
    dag = ComputeDAG(conv2d_bias_relu(1, 5, 5, 4, 3, 3, 3, 1, 1))
    pad, conv, add = _info(dag, "pad"), _info(dag, "conv"), _info(dag, "bias_add")
    assert pad.has_branch and not pad.is_strictly_inlineable and not pad.is_elementwise
    assert conv.needs_multi_level_tiling
    assert add.is_strictly_inlineable and not add.is_elementwise  # reads bias[f]: broadcast
    dag = ComputeDAG(softmax(4, 7))
    mx, e = _info(dag, "max"), _info(dag, "exp")
    assert mx.has_reduction and not mx.needs_multi_level_tiling  # no reuse across outputs
    assert e.has_expensive_op and not e.is_strictly_inlineable
    assert "reduction" in str(dag)


def test_size_one_axis_gives_no_reuse():
    # C[i, j] over j of extent 1: B is read without i, but there is nothing to tile for j
    dag = ComputeDAG(matmul(1, 1, 16))
    assert not _info(dag, "C").needs_multi_level_tiling


def test_workload_key_and_task():
    task = make_task(matmul, (4, 5, 6))
    assert json.loads(task.workload_key) == ["matmul", 4, 5, 6]
    dag = ComputeDAG(task.workload_key)
    assert [op.name for op in dag.ops] == ["A", "B", "C"]
    assert dag.flop_ct() == 2 * 4 * 5 * 6
    sch, args = dag.apply_steps_from_state(dag.init_state())
    assert [t.name for t in args] == ["A", "B", "C"]


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="not registered"):
        auto_scheduler.SearchTask(workload_key=json.dumps(["no_such_workload", 1]), target="llvm")
    with pytest.raises(ValueError, match="target"):
        auto_scheduler.SearchTask(func=matmul, args=(2, 2, 2))
    with pytest.raises(TypeError, match="te.Tensor"):
        ComputeDAG([1, 2])
    a = te.placeholder((3,), name="a")
    with pytest.raises(ValueError, match="only placeholders"):
        ComputeDAG([a])
    with pytest.raises(ValueError, match="not a workload key"):
        ComputeDAG("[]")


def test_unregistered_function_is_registered_by_search_task():
    def my_add(n):
        a = te.placeholder((n,), name="a")
        return [a, te.compute((n,), lambda i: a[i] + 1.0, name="b")]

    task = auto_scheduler.SearchTask(func=my_add, args=(7,), target="llvm")
    assert json.loads(task.workload_key) == ["my_add", 7]
