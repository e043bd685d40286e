"""The steps of TVM's tutorial "Quick Start Tutorial for Compiling Deep Learning Models", in our
own code: a ResNet-18 from ``relay.testing`` (random weights, a small 3x32x32 image, 10 classes),
``relay.build`` at opt_level 3 (``PassContext`` and the legacy ``relay.build_config``), the graph
executor (``graph_executor`` and the legacy ``graph_runtime`` with ``graph, lib, params``), then the
compiled library exported as a tar with the graph JSON and the parameter blob beside it, loaded
back and run again: the outputs agree with each other and with the numpy reference interpreter."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor, graph_runtime, utils
from tvmpy.relay import testing

BATCH, IMAGE, CLASSES = 1, (3, 32, 32), 10


@pytest.fixture(scope="module")
def workload():
    mod, params = testing.resnet.get_workload(num_layers=18, batch_size=BATCH,
                                              image_shape=IMAGE, num_classes=CLASSES)
    data = np.random.default_rng(7).uniform(-1, 1, (BATCH, *IMAGE)).astype("float32")
    return mod, params, data


@pytest.fixture(scope="module")
def reference(workload):
    mod, params, data = workload
    return relay.create_executor("debug", mod=mod).evaluate()(data, **params).numpy()


@pytest.fixture(scope="module")
def lib(workload):
    mod, params, _ = workload
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target="llvm", params=params)


def test_build_run_and_compare(workload, reference, lib):
    _, _, data = workload
    dev = tvm.cpu(0)
    module = graph_executor.GraphModule(lib["default"](dev))
    module.set_input("data", data)
    module.run()
    out = module.get_output(0, tvm.nd.empty((BATCH, CLASSES))).numpy()
    assert out.shape == (BATCH, CLASSES) and np.abs(out).max() > 0
    tvm.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-4)


def test_export_tar_load_and_run_again(workload, lib, tmp_path):
    _, _, data = workload
    dev = tvm.cpu(0)
    module = graph_executor.GraphModule(lib["default"](dev))
    module.run(data=data)
    out = module.get_output(0).numpy()
    temp = utils.tempdir(str(tmp_path / "deploy"))
    path_lib = temp.relpath("deploy_lib.tar")
    lib.export_library(path_lib)
    loaded = tvm.runtime.load_module(path_lib)
    again = graph_executor.GraphModule(loaded["default"](dev))
    again.run(data=tvm.nd.array(data))
    tvm.testing.assert_allclose(again.get_output(0).numpy(), out, atol=1e-5)


def test_legacy_build_config_graph_runtime_and_param_blob(workload, reference, tmp_path):
    """The v0.6 spelling: ``relay.build_config``, ``graph, lib, params = relay.build(...)``,
    ``graph_runtime.create``; the graph JSON, the library (.tar) and ``save_param_dict``'s
    bytes saved as three files, loaded and run with ``load_params``."""
    mod, params, data = workload
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with relay.build_config(opt_level=3):
            graph, lib, params = relay.build(mod, target="llvm", params=params)
    (tmp_path / "deploy_graph.json").write_text(graph)
    lib.export_library(str(tmp_path / "deploy_lib.tar"))
    (tmp_path / "deploy_param.params").write_bytes(relay.save_param_dict(params))

    loaded_lib = tvm.runtime.load_module(str(tmp_path / "deploy_lib.tar"))
    module = graph_runtime.create((tmp_path / "deploy_graph.json").read_text(), loaded_lib,
                                  tvm.cpu(0))
    module.load_params(bytearray((tmp_path / "deploy_param.params").read_bytes()))
    module.set_input("data", data.astype("float64"))  # converted, as TVM's set_input does
    module.run()
    tvm.testing.assert_allclose(module.get_output(0).numpy(), reference, rtol=1e-4, atol=1e-4)
