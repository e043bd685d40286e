"""A fast CI subset of onnx's backend node tests through tvmpy's ONNX backend.

One case per operator type that passes in ``bench/onnx_conformance.py`` (the full run, whose
counts are in bench/RESULTS.md), generated in process from the installed onnx and checked with
onnx's own comparison (``Runner.assert_similar_outputs``: shapes, dtypes, rtol/atol of the case).
Runs on relay's numpy interpreter (``debug``), and a few cases through the compiled executor
when ``relay.build`` exists.
"""

import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx.backend.test.runner import Runner  # noqa: E402

from tvmpy import relay  # noqa: E402
from tvmpy.contrib.onnx_backend import TvmpyBackend  # noqa: E402

SUBSET = [
    "test_abs", "test_acos", "test_acosh", "test_add", "test_affine_grid_2d", "test_and2d",
    "test_argmax_keepdims_random", "test_argmin_keepdims_random", "test_asin", "test_asinh",
    "test_atan", "test_atanh", "test_attention_3d", "test_averagepool_2d_ceil",
    "test_batchnorm_epsilon", "test_bitshift_left_int8", "test_bitwise_and_i16_3d",
    "test_bitwise_not_2d", "test_bitwise_or_i16_4d", "test_bitwise_xor_i16_3d",
    "test_blackmanwindow", "test_cast_DOUBLE_to_FLOAT", "test_castlike_DOUBLE_to_FLOAT",
    "test_causal_conv_with_state_fp16", "test_ceil", "test_celu", "test_center_crop_pad_pad",
    "test_clip", "test_col2im", "test_compress_0", "test_concat_1d_axis_0", "test_constant",
    "test_constantofshape_int_zeros", "test_conv_with_autopad_same",
    "test_convinteger_with_padding", "test_convtranspose", "test_cos", "test_cosh",
    "test_cumprod_1d", "test_cumsum_1d", "test_deform_conv_with_mask_bias",
    "test_depthtospace_example", "test_dequantizelinear", "test_det_2d", "test_dft", "test_div",
    "test_dropout_default", "test_dynamicquantizelinear", "test_edge_pad", "test_einsum_sum",
    "test_elu", "test_equal", "test_erf", "test_exp", "test_expand_dim_changed",
    "test_eyelike_with_dtype", "test_flatten_axis0", "test_flexattention", "test_floor",
    "test_gather_0", "test_gather_elements_0", "test_gathernd_example_int32", "test_gelu_tanh_1",
    "test_gemm_beta", "test_globalaveragepool", "test_globalmaxpool", "test_greater",
    "test_greater_equal", "test_gridsample", "test_group_normalization_epsilon",
    "test_gru_reverse", "test_hammingwindow", "test_hannwindow", "test_hardmax_axis_0",
    "test_hardsigmoid", "test_hardswish", "test_identity", "test_instancenorm_epsilon",
    "test_isinf", "test_isnan", "test_l1normalization_axis_0", "test_layer_normalization_2d_axis0",
    "test_leakyrelu", "test_less", "test_less_equal", "test_linear_attention_fp16", "test_log",
    "test_logsoftmax_axis_0", "test_lppool_2d_pads", "test_lrn", "test_lstm_reverse",
    "test_matmul_2d", "test_matmulinteger", "test_max_int8", "test_maxpool_2d_ceil",
    "test_maxunpool_export_with_output_shape", "test_mean_example", "test_min_int8", "test_mish",
    "test_mod_uint8", "test_mul", "test_mvn", "test_neg", "test_nllloss_NC", "test_not_2d",
    "test_onehot_with_axis", "test_or2d", "test_pow", "test_prelu_example", "test_qlinearconv",
    "test_qlinearmatmul_2D_int8_float16", "test_quantizelinear",
    "test_range_float_type_positive_delta", "test_reciprocal", "test_reduce_l1_empty_set",
    "test_reduce_l2_empty_set", "test_reduce_log_sum_default", "test_reduce_log_sum_exp_empty_set",
    "test_reduce_max_empty_set", "test_reduce_mean_keepdims_random", "test_reduce_min_empty_set",
    "test_reduce_prod_empty_set", "test_reduce_sum_empty_set", "test_reduce_sum_square_empty_set",
    "test_relu", "test_reshape_one_dim", "test_resize_tf_crop_and_resize",
    "test_reversesequence_time", "test_rms_normalization_2d_axis0", "test_rnn_seq_length",
    "test_roialign_mode_max", "test_rotary_embedding", "test_round",
    "test_scatter_elements_with_axis", "test_scatter_with_axis", "test_scatternd", "test_sce_sum",
    "test_selu", "test_shape", "test_shrink_hard", "test_sigmoid", "test_sign", "test_sin",
    "test_sinh", "test_size", "test_slice", "test_softmax_axis_0", "test_softplus",
    "test_softsign", "test_spacetodepth", "test_split_equal_parts_2d", "test_sqrt", "test_squeeze",
    "test_stft", "test_sub", "test_sum_example", "test_swiglu", "test_swish", "test_tan",
    "test_tanh", "test_tensorscatter", "test_tfidfvectorizer_tf_onlybigrams_skip5",
    "test_thresholdedrelu", "test_tile", "test_top_k", "test_transpose_default", "test_tril",
    "test_unsqueeze_axis_0", "test_upsample_nearest", "test_where_example", "test_xor2d",
    "test_bitcast_float32_to_int32", "test_ai_onnx_ml_binarizer",
    "test_ai_onnx_ml_array_feature_extractor", "test_ai_onnx_ml_tree_ensemble_set_membership",
]

# compiled-executor subset: a few representative kinds of graph (conv, pool, matmul, reduce,
# shape-like inputs, multi-output, integer, expanded function)
GRAPH_SUBSET = ["test_conv_with_strides_padding", "test_maxpool_2d_pads", "test_matmul_3d",
                "test_reduce_sum_keepdims_random", "test_reshape_negative_dim",
                "test_slice_neg_steps", "test_split_equal_parts_1d_opset18", "test_mod_int64_fmod",
                "test_softmax_axis_1_expanded", "test_layer_normalization_2d_axis0"]

# run-time shape values, data-dependent output sizes, control flow, sequences and optionals:
# every input fed at run time, one build per model; run by the interpreter and by relay.build's
# path (the graph executor hands these models to the VM), with no numpy fallback in the VM
DYNAMIC_SUBSET = [
    "test_reshape_negative_dim", "test_expand_dim_changed", "test_constantofshape_int_zeros",
    "test_range_float_type_positive_delta", "test_tile", "test_slice", "test_constant_pad",
    "test_split_variable_parts_1d_opset18", "test_squeeze", "test_unsqueeze_axis_0",
    "test_center_crop_pad_crop", "test_resize_upsample_scales_linear", "test_top_k",
    "test_onehot_with_axis", "test_reduce_sum_keepdims_random",
    "test_reduce_l2_do_not_keepdims_random", "test_tril", "test_cumsum_1d_exclusive",
    "test_blackmanwindow", "test_dft", "test_col2im", "test_affine_grid_2d",
    "test_maxunpool_export_with_output_shape", "test_dropout_default", "test_nonzero_example",
    "test_unique_sorted_with_axis", "test_unique_not_sorted_without_axis",
    "test_nonmaxsuppression_two_batches", "test_nonmaxsuppression_suppress_by_IOU",
    "test_compress_0", "test_if", "test_scan9_sum", "test_scan_sum", "test_melweightmatrix",
    # a loop-carried (?, ?) tensor concatenated with a (1, ?) row: the widths are unified in
    # the kernel and checked at run time (relay/size_checks.py)
    "test_loop11",
]
# cases whose lists (sequences grown at run time) are VM builtins: no kernel, by design
HOST_LIST_SUBSET = ["test_loop13_seq", "test_if_seq", "test_sequence_insert_at_back",
                    "test_sequence_map_add_2_sequences", "test_split_to_sequence_1",
                    "test_optional_get_element_tensor",
                    "test_optional_has_element_empty_optional_input", "test_if_opt",
                    "test_sequence_map_extract_shapes_expanded"]

# low-precision element types (bfloat16, float8, int4/uint4/int2/uint2): a case per kind of use,
# on both executors
LOW_PRECISION_SUBSET = [
    "test_cast_FLOAT_to_BFLOAT16", "test_cast_BFLOAT16_to_FLOAT", "test_cast_FLOAT_to_FLOAT8E4M3FN",
    "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2", "test_cast_FLOAT8E4M3FNUZ_to_FLOAT16",
    "test_cast_FLOAT_to_INT4", "test_cast_UINT2_to_UINT8",
    "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded", "test_quantizelinear_e4m3fn",
    "test_quantizelinear_uint4", "test_quantizelinear_int2", "test_dequantizelinear_e4m3fn_float16",
    "test_dequantizelinear_int4", "test_einsum_batch_matmul_bfloat16",
    "test_range_bfloat16_type_positive_delta", "test_attention_3d_causal_bf16",
    "test_cast_FLOAT_to_FLOAT4E2M1", "test_quantizelinear_float4e2m1",
    "test_cast_e8m0_FLOAT_to_FLOAT8E8M0", "test_cast_e8m0_FLOAT8E8M0_to_FLOAT16",
]


@pytest.fixture(scope="module")
def cases():
    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return {c.name: c for c in load_node_model_tests()}


def _data(case):
    """Inputs and expected outputs as numpy arrays (some cases hold TensorProtos)."""
    from onnx import TensorProto, numpy_helper

    return [[numpy_helper.to_array(t) if isinstance(t, TensorProto) else t for t in ts]
            for ts in case.data_sets[0]]


# float -> fixed-point Cast beyond the target's range is undefined in ONNX ("fixed point:
# undefined if OOR"): the case's data hold such inputs, whose expected values follow the
# installed ml_dtypes (0 from 0.7 on, wrapped before); those elements are not compared
_UNDEFINED_OUT_OF_RANGE = {"test_cast_FLOAT_to_INT4": (-8, 7)}


def _run(case, executor, **kwargs):
    rep = TvmpyBackend.prepare(case.model, "CPU", executor=executor, **kwargs)
    inputs, ref = _data(case)
    with np.errstate(all="ignore"):
        out = list(rep.run(inputs))
    if case.name in _UNDEFINED_OUT_OF_RANGE:
        lo, hi = _UNDEFINED_OUT_OF_RANGE[case.name]
        beyond = (inputs[0] < lo) | (inputs[0] >= hi + 1)
        assert beyond.any() and not beyond.all()  # both kinds of element are in the data
        out[0] = np.where(beyond, ref[0], np.asarray(out[0]).astype(ref[0].dtype))
    Runner.assert_similar_outputs(ref, out, rtol=case.rtol, atol=case.atol)
    return rep


def test_subset_is_representative(cases):
    assert len(SUBSET) >= 150 and len(set(SUBSET)) == len(SUBSET)
    missing = [n for n in SUBSET + GRAPH_SUBSET + LOW_PRECISION_SUBSET + DYNAMIC_SUBSET
               + HOST_LIST_SUBSET if n not in cases]
    assert not missing, f"not generated by this onnx: {missing}"
    ops = {cases[n].model.graph.node[0].op_type for n in SUBSET}
    assert len(ops) >= 150


def test_node_subset_debug(cases):
    failures = []
    for name in SUBSET:
        try:
            _run(cases[name], "debug")
        except Exception as e:  # noqa: BLE001 -- collect every failing case, then report
            failures.append(f"{name}: {type(e).__name__}: {str(e).strip()[:200]}")
    assert not failures, f"{len(failures)}/{len(SUBSET)} failed:\n" + "\n".join(failures)


@pytest.mark.skipif(not hasattr(relay, "build"), reason="relay.build not available")
@pytest.mark.parametrize("name", GRAPH_SUBSET)
def test_node_subset_graph_executor(cases, name):
    _run(cases[name], "graph")


def test_dynamic_subset_debug(cases):
    failures = []
    for name in DYNAMIC_SUBSET + HOST_LIST_SUBSET:
        try:
            _run(cases[name], "debug")
        except Exception as e:  # noqa: BLE001 -- collect every failing case, then report
            failures.append(f"{name}: {type(e).__name__}: {str(e).strip()[:200]}")
    assert not failures, f"{len(failures)} failed:\n" + "\n".join(failures)


@pytest.mark.skipif(not hasattr(relay, "build"), reason="relay.build not available")
@pytest.mark.parametrize("name", DYNAMIC_SUBSET + HOST_LIST_SUBSET)
def test_dynamic_subset_compiled(cases, name):
    """Through the graph executor's path (which hands the VM what needs it), every operator
    compiled (the run-time lists of HOST_LIST_SUBSET are VM builtins)."""
    rep = _run(cases[name], "graph", opt_level=3)
    if name in ("test_nonzero_example", "test_loop11", "test_reshape_negative_dim"):
        assert rep.executor_used == "vm"
    if name in DYNAMIC_SUBSET:
        assert rep.host_ops == [], f"ran with numpy, not a kernel: {rep.host_ops}"
    else:
        assert all(op.startswith(("list.", "optional")) for op in rep.host_ops), rep.host_ops


@pytest.mark.parametrize("executor", ["debug", "graph"])
def test_low_precision_subset(cases, executor):
    pytest.importorskip("ml_dtypes")
    if executor == "graph" and not hasattr(relay, "build"):
        pytest.skip("relay.build not available")
    failures = []
    for name in LOW_PRECISION_SUBSET:
        try:
            _run(cases[name], executor)
        except Exception as e:  # noqa: BLE001 -- collect every failing case, then report
            failures.append(f"{name}: {type(e).__name__}: {str(e).strip()[:200]}")
    assert not failures, "\n".join(failures)


def test_wrong_values_are_detected(cases):
    """The comparison used above fails on a wrong answer (guards against a vacuous subset)."""
    case = cases["test_relu"]
    inputs, ref = case.data_sets[0]
    out = list(TvmpyBackend.prepare(case.model, executor="debug").run(inputs))
    with pytest.raises(AssertionError):
        Runner.assert_similar_outputs(ref, [out[0] + 1e-2], rtol=case.rtol, atol=case.atol)


def test_shape_like_inputs_fed_at_run_time(cases):
    """Reshape's shape arrives as a graph input: one build serves every value (dyn.reshape)."""
    case = cases["test_reshape_negative_dim"]
    (x, shape), ref = case.data_sets[0]
    for executor in ("debug", "graph"):
        rep = TvmpyBackend.prepare(case.model, executor=executor)
        np.testing.assert_array_equal(rep.run([x, shape])[0], ref[0])
        other = np.array([x.shape[-1], -1, 1][:len(shape)], dtype=shape.dtype)
        np.testing.assert_array_equal(rep.run([x, other])[0], x.reshape(other))
        assert rep.bound == set() and len(rep._cache) == 1
        with pytest.raises(Exception, match="cannot reshape"):
            rep.run([x, np.array([7, -1, 5][:len(shape)], dtype=shape.dtype)])


def test_shape_like_inputs_bound_and_cached(cases):
    """bind_inputs=True: Reshape's shape is bound as a constant, compiled once per value."""
    case = cases["test_reshape_negative_dim"]
    rep = TvmpyBackend.prepare(case.model, executor="debug", bind_inputs=True)
    (x, shape), ref = case.data_sets[0]
    np.testing.assert_array_equal(rep.run([x, shape])[0], ref[0])
    assert rep.bound == {case.model.graph.input[1].name}
    rep.run([x, shape])
    assert len(rep._cache) == 1
    other = np.array([x.shape[-1], -1, 1][:len(shape)], dtype=shape.dtype)
    np.testing.assert_array_equal(rep.run([x, other])[0], x.reshape(other))
    assert len(rep._cache) == 2


def test_backend_bad_inputs(cases):
    case = cases["test_add"]
    rep = TvmpyBackend.prepare(case.model, executor="debug")
    x, y = case.data_sets[0][0]
    with pytest.raises(ValueError, match="missing inputs"):
        rep.run([x])
    with pytest.raises(ValueError, match="3 inputs given"):
        rep.run([x, y, y])
    with pytest.raises(ValueError, match="'x'.*expected dtype float32, got float64"):
        rep.run([x.astype(np.float64), y])
    with pytest.raises(ValueError, match=r"'y'.*expected shape \[3, 4, 5\], got \[3, 4\]"):
        rep.run([x, y[..., 0]])
    with pytest.raises(ValueError, match="CPU"):
        TvmpyBackend.prepare(case.model, "CUDA")
    with pytest.raises(ValueError, match="executor"):
        TvmpyBackend.prepare(case.model, executor="aot")


def test_executor_selection(monkeypatch):
    from tvmpy.contrib.onnx_backend import ENV_EXECUTOR, default_executor

    monkeypatch.setenv(ENV_EXECUTOR, "debug")
    assert default_executor() == "debug"
    monkeypatch.setenv(ENV_EXECUTOR, "vm")
    assert default_executor() == "vm"
    monkeypatch.setenv(ENV_EXECUTOR, "aot")
    with pytest.raises(ValueError, match="expected one of"):
        default_executor()
    monkeypatch.delenv(ENV_EXECUTOR)
    assert default_executor() == ("graph" if hasattr(relay, "build") else "debug")
