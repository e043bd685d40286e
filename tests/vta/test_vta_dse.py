"""Design-space sweeps build and run many designs in one process (bench/vta_dse.py): each
module must run on a queue of its own design, whatever environments came and went before."""

import gc

import numpy as np

import tvmpy.vta as vta
from tvmpy.vta.build import _queue_for, use_command_queue
from tvmpy.vta.hw_config import HardwareConfig
from tvmpy.vta.top import workloads as W

DESIGNS = [HardwareConfig(log_block_in=3, log_block_out=3, log_inp_buff_size=13,
                          log_wgt_buff_size=16, log_acc_buff_size=15),
           HardwareConfig(log_batch=1, log_block_in=4, log_block_out=5),
           HardwareConfig()]


def test_queue_follows_the_design_not_the_environment_object():
    use_command_queue(None)
    for _ in range(20):  # collected environments' ids are reused by the next ones
        for cfg in DESIGNS:
            env = vta.Environment(cfg)
            assert _queue_for(env).config == cfg
            del env
            gc.collect()
    a, b = vta.Environment(DESIGNS[1]), vta.Environment(DESIGNS[1])
    assert _queue_for(a) is _queue_for(b)  # one queue (and micro-kernel cache) per design
    slow = vta.Environment(DESIGNS[1].replace(dram_bytes_per_cycle=2.0))
    assert _queue_for(slow) is not _queue_for(a)


def test_designs_built_in_turn_compute_numpy_result():
    """Build and run a conv under each design in turn, environments dropped in between (the
    sweep's pattern): bit-exact against numpy every time."""
    use_command_queue(None)
    wkl = W.Conv2DWorkload(1, 5, 7, 32, 32, 3, 3, 1, 1, 1, 1)
    inp = W.conv2d_inputs(wkl, 3)
    want = W.conv2d_reference(wkl, inp)[1]
    for _ in range(2):
        for cfg in DESIGNS:
            with vta.Environment(cfg) as env:
                f = W.build_conv2d(wkl)
                packed = W.pack_conv2d_inputs(wkl, inp)
                shape = (packed[0].shape[0], packed[1].shape[0], 5, 7, env.BATCH, env.BLOCK_OUT)
            gc.collect()
            with vta.Environment(cfg):
                out, st = W.run_module(f, packed, shape)
            np.testing.assert_array_equal(W.unpack_conv2d_out(wkl, out), want, err_msg=str(cfg))
            assert st["cycle_count"] > 0
