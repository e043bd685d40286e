"""Device values: construction, names, equality."""

import pytest

import tvmpy as tvm
from tvmpy.runtime import Device


def test_cpu():
    d = tvm.cpu(0)
    assert d.device_type == 1 and d.device_id == 0
    assert str(d) == "cpu(0)"
    assert d == tvm.cpu() == tvm.device("cpu", 0) == tvm.device("llvm") == tvm.device("cpu:0")
    assert d != tvm.cpu(1) and d != "cpu(0)"
    assert hash(d) == hash(tvm.device("c"))
    assert d.exist and not tvm.cpu(1).exist
    assert d.__dlpack_device__() == (1, 0)
    assert tvm.runtime.Device is Device and tvm.Device is Device


def test_other_devices_and_codes():
    assert str(tvm.device("cuda", 1)) == "cuda(1)"
    assert tvm.device(2, 3) == Device(2, 3)
    assert tvm.device("opencl").device_type == 4
    assert not tvm.device("cuda").exist


@pytest.mark.parametrize("bad", ["tpu", "cpu:x", ""])
def test_unknown_device_string(bad):
    with pytest.raises(ValueError, match="device"):
        tvm.device(bad)


def test_bad_codes_and_ids():
    with pytest.raises(ValueError, match="unknown device type code 99"):
        Device(99, 0)
    with pytest.raises(ValueError, match="non-negative"):
        tvm.cpu(-1)
    with pytest.raises(TypeError):
        tvm.device(1.5)
