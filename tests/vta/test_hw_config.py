"""VTA hardware configuration: TVM's derived sizes, other design points, clear errors."""

from __future__ import annotations

import json

import pytest

from tvmpy.vta import hw_config as hc


def test_default_matches_vta_config_json():
    cfg = hc.default_config()
    assert (cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT) == (1, 16, 16)
    assert (cfg.INP_WIDTH, cfg.WGT_WIDTH, cfg.ACC_WIDTH, cfg.OUT_WIDTH) == (8, 8, 32, 8)
    assert (cfg.INP_ELEM_BYTES, cfg.WGT_ELEM_BYTES, cfg.ACC_ELEM_BYTES,
            cfg.OUT_ELEM_BYTES, cfg.UOP_ELEM_BYTES) == (16, 256, 64, 16, 4)
    assert (cfg.UOP_BUFF_DEPTH, cfg.INP_BUFF_DEPTH, cfg.WGT_BUFF_DEPTH,
            cfg.ACC_BUFF_DEPTH) == (8192, 2048, 1024, 2048)
    assert cfg.LOG_ACC_BUFF_DEPTH == 11 and cfg.OUT_BUFF_DEPTH == 2048
    assert (cfg.inp_dtype, cfg.acc_dtype) == ("int8", "int32")
    tvm_json = {"TARGET": "sim", "HW_VER": "0.0.1", "LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3,
                "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15,
                "LOG_INP_BUFF_SIZE": 15, "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17}
    assert hc.HardwareConfig.from_dict(tvm_json) == cfg
    assert hc.HardwareConfig.from_dict(cfg.to_dict()) == cfg


def test_json_file(tmp_path):
    p = tmp_path / "vta_config.json"
    p.write_text(json.dumps({"LOG_BATCH": 1, "LOG_BLOCK": 5, "HW_FREQ": 250,
                             "DRAM_BYTES_PER_CYCLE": 16}))
    cfg = hc.HardwareConfig.from_json(str(p))
    assert (cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT, cfg.clock_mhz) == (2, 32, 32, 250.0)
    assert cfg.dram_bytes_per_cycle == 16


@pytest.mark.parametrize("changes, sizes", [
    ({"log_batch": 1}, (2, 16, 16, 32, 256, 128, 1024, 1024, 1024)),
    ({"log_block_in": 5, "log_block_out": 5}, (1, 32, 32, 32, 1024, 128, 1024, 256, 1024)),
    ({"log_block_in": 3, "log_block_out": 3, "log_inp_buff_size": 14, "log_wgt_buff_size": 16,
      "log_acc_buff_size": 16}, (1, 8, 8, 8, 64, 32, 2048, 1024, 2048)),
    ({"log_block_in": 4, "log_block_out": 5}, (1, 16, 32, 16, 512, 128, 2048, 512, 1024)),
])
def test_other_configs(changes, sizes):
    cfg = hc.HardwareConfig(**changes)
    assert (cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT, cfg.INP_ELEM_BYTES, cfg.WGT_ELEM_BYTES,
            cfg.ACC_ELEM_BYTES, cfg.INP_BUFF_DEPTH, cfg.WGT_BUFF_DEPTH,
            cfg.ACC_BUFF_DEPTH) == sizes


@pytest.mark.parametrize("changes, message", [
    ({"log_inp_width": 2}, "LOG_INP_WIDTH/LOG_WGT_WIDTH must be 3"),
    ({"log_acc_width": 4}, "LOG_ACC_WIDTH must be 5"),
    ({"log_wgt_buff_size": 7}, "WGT buffer .* cannot hold one 256-byte tile"),
    ({"log_acc_buff_size": 5}, "ACC buffer .* cannot hold one 64-byte tile"),
    ({"log_uop_buff_size": 1}, "UOP buffer .* cannot hold one 4-byte tile"),
    ({"log_inp_buff_size": 24}, "more than the 16-bit SRAM address"),
    ({"log_block_in": 3, "log_block_out": 3}, "GEMM instruction format needs .* bits"),
    ({"log_batch": -1}, "LOG_BATCH must be a non-negative integer"),
    ({"dram_bytes_per_cycle": 0}, "must be positive"),
])
def test_invalid_configs(changes, message):
    with pytest.raises(hc.ConfigError, match=message):
        hc.HardwareConfig(**changes)


def test_dict_errors():
    with pytest.raises(hc.ConfigError, match="unknown VTA configuration key 'LOG_BLOK'"):
        hc.HardwareConfig.from_dict({"LOG_BLOK": 4})
    with pytest.raises(hc.ConfigError, match="contradicts LOG_BLOCK_IN"):
        hc.HardwareConfig.from_dict({"LOG_BLOCK": 4, "LOG_BLOCK_IN": 3})


def test_constants_match_tvm():
    assert (hc.MEM_ID_UOP, hc.MEM_ID_WGT, hc.MEM_ID_INP, hc.MEM_ID_ACC, hc.MEM_ID_OUT) == (
        0, 1, 2, 3, 4)
    assert hc.QID_LOAD_INP == hc.QID_LOAD_WGT == hc.QID_LOAD_UOP == 1
    assert hc.QID_COMPUTE == hc.QID_LOAD_OUT == 2 and hc.QID_STORE_OUT == 3
    assert (hc.ALU_OPCODE_MIN, hc.ALU_OPCODE_MAX, hc.ALU_OPCODE_ADD, hc.ALU_OPCODE_SHR) == (
        0, 1, 2, 3)
