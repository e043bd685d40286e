"""relay.testing workloads: ResNet-18, MobileNetV2 and the BERT-style encoder type-check with the
expected shapes, op counts and parameter counts (which match torchvision's models)."""

import collections
import re

import numpy as np
import pytest

from tvmpy.relay import testing


def _ops(mod):
    # bound nodes (`%3 = op(`) and the function's final expression (`  op(`)
    return collections.Counter(re.findall(r"(?:= |^  )([\w.]+)\(", str(mod), re.MULTILINE))


def _check_params(mod, params):
    main = mod["main"]
    by_name = {p.name_hint: p for p in main.params}
    assert set(params) <= set(by_name)
    for name, value in params.items():
        t = by_name[name].type_annotation
        assert value.shape == t.shape and str(value.dtype) == t.dtype
        assert np.isfinite(value).all() and np.abs(value).max() > 0
    return by_name


def test_resnet18():
    mod, params = testing.resnet.get_workload(num_layers=18)
    by_name = _check_params(mod, params)
    assert set(by_name) - set(params) == {"data"}
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(1, 1000), float32]"
    ops = _ops(mod)
    assert ops["nn.conv2d"] == 20 and ops["nn.batch_norm"] == 20 and ops["add"] == 8
    bn_channels = sum(v.shape[0] for k, v in params.items() if k.endswith("_moving_mean"))
    # torchvision resnet18: 11,689,512 trainable parameters (+ 2 running statistics per channel)
    assert sum(v.size for v in params.values()) == 11_689_512 + 2 * bn_channels


def test_resnet34_small_input():
    mod, _ = testing.resnet.get_workload(num_layers=34, batch_size=2, image_shape=(3, 64, 64),
                                         num_classes=10)
    assert mod["main"].checked_type.ret_type.shape == (2, 10)
    assert _ops(mod)["nn.conv2d"] == 36
    with pytest.raises(ValueError, match="num_layers"):
        testing.resnet.get_workload(num_layers=19)


def test_mobilenet_v2():
    mod, params = testing.mobilenet_v2.get_workload()
    _check_params(mod, params)
    assert mod["main"].checked_type.ret_type.shape == (1, 1000)
    ops = _ops(mod)
    assert ops["nn.conv2d"] == 52 and ops["add"] == 10 and ops["clip"] == 35
    depthwise = re.findall(r"nn.conv2d\([^)]*groups=(\d+)", str(mod))
    assert len(depthwise) == 17
    bn_channels = sum(v.shape[0] for k, v in params.items() if k.endswith("_moving_mean"))
    assert sum(v.size for v in params.values()) == 3_504_872 + 2 * bn_channels


def test_bert_encoder():
    mod, params = testing.bert.get_workload(num_layers=4, hidden=256, heads=4, seq_len=128)
    _check_params(mod, params)
    main = mod["main"]
    assert str(main.params[0].type_annotation) == "Tensor[(1, 128), int64]"
    assert main.checked_type.ret_type.shape == (1, 128, 256)
    ops = _ops(mod)
    assert ops["nn.batch_matmul"] == 8 and ops["nn.softmax"] == 4 and ops["nn.layer_norm"] == 9
    assert ops["nn.dense"] == 24
    assert "nn.batch_matmul(%" in str(mod) and "ty=Tensor[(4, 128, 128), float32]" in str(mod)
