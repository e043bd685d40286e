"""The opt_level-3 graph-pass pipeline (SimplifyInference, FoldConstant, FoldScaleAxis,
EliminateCommonSubexpr, DeadCodeElimination) on MobileNetV2 and the BERT-style encoder: the
outputs stay equal (numpy interpreter) and batch_norm disappears."""

import numpy as np
from _pass_util import count_ops, run

import tvmpy as tvm
from tvmpy.relay import IRModule, testing, transform
from tvmpy.relay.transform import bind_params_by_name


def _pipeline():
    return transform.Sequential([
        transform.SimplifyInference(), transform.FoldConstant(), transform.FoldScaleAxis(),
        transform.FoldConstant(), transform.EliminateCommonSubexpr(),
        transform.DeadCodeElimination(),
    ])  # fmt: skip


def _optimize(mod, params, opt_level=3):
    bound = IRModule.from_expr(bind_params_by_name(mod["main"], params))
    with tvm.transform.PassContext(opt_level=opt_level):
        return _pipeline()(bound)


def test_mobilenet_v2():
    mod, params = testing.mobilenet_v2.get_workload(image_shape=(3, 32, 32), num_classes=10,
                                                    width_mult=0.5)
    out = _optimize(mod, params)
    body = out["main"].body
    assert count_ops(mod["main"].body, "nn.batch_norm") > 0
    assert count_ops(body, "nn.batch_norm") == 0 and count_ops(body, "multiply") == 0
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 32, 32)).astype("float32")
    want = run(mod, {"data": x, **params})
    np.testing.assert_allclose(run(out, {"data": x}), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())
    # opt_level 0: only SimplifyInference runs (batch_norm gone, its arithmetic kept)
    lvl0 = _optimize(mod, params, opt_level=0)["main"].body
    assert count_ops(lvl0, "nn.batch_norm") == 0 and count_ops(lvl0, "sqrt") > 0


def test_bert_encoder():
    mod, params = testing.bert.get_workload(num_layers=2, hidden=32, heads=2, seq_len=8,
                                            vocab_size=50)
    out = _optimize(mod, params)
    assert count_ops(out["main"].body, "nn.layer_norm") == count_ops(mod["main"].body,
                                                                     "nn.layer_norm")
    ids = np.random.default_rng(4).integers(0, 50, (1, 8)).astype("int64")
    want = run(mod, {"input_ids": ids, **params})
    np.testing.assert_allclose(run(out, {"input_ids": ids}), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())
