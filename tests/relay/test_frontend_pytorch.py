"""relay.frontend.from_pytorch: torch models (eval mode, random weights and inputs) converted
through torch.export, run on relay's numpy interpreter (and, where relay.build exists, compiled
at opt_level 3), compared with torch's own outputs."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tvmpy import relay  # noqa: E402
from tvmpy.relay.frontend import OpNotImplemented, PyTorchConvertError, from_pytorch  # noqa: E402

torch.manual_seed(0)
RNG = np.random.default_rng(0)


class Fn(nn.Module):
    """A module around a function, so single ops export as models."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _rand(shape, dtype="float32", high=None):
    if dtype.startswith("int"):
        return torch.from_numpy(RNG.integers(0, high or 5, size=shape).astype(dtype))
    if dtype == "bool":
        return torch.from_numpy(RNG.random(shape) > 0.5)
    return torch.from_numpy(RNG.standard_normal(shape).astype(dtype))


def _as_list(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)) and not any(isinstance(x, torch.Tensor) for x in
                                                torch.utils._pytree.tree_leaves(v)):
        return [x for item in v for x in _as_list(item)]  # relay's nested results
    return torch.utils._pytree.tree_leaves(v)


def _np(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _compare(got, want, rtol, atol):
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        w = w.detach().numpy()
        g = _np(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        if w.dtype == bool or w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _build_available():
    return hasattr(relay, "build")


def _run_built(mod, params, feeds, n_out):
    import tvmpy as tvm
    from tvmpy.contrib import graph_executor

    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for k, v in feeds.items():
        m.set_input(k, v)
    m.run()
    return [m.get_output(i).numpy() for i in range(n_out)]


def _check(model, inputs, names=None, rtol=1e-4, atol=1e-5, build=False, freeze=False):
    """Convert ``model`` (an nn.Module or a function), run it on ``inputs``, compare with torch."""
    if not isinstance(model, nn.Module):
        model = Fn(model)
    model = model.eval()
    names = names or [f"x{i}" for i in range(len(inputs))]
    infos = [(n, (list(t.shape), str(t.dtype).replace("torch.", ""))) for n, t in
             zip(names, inputs)]
    with torch.no_grad():
        want = _as_list(model(*[t.clone() for t in inputs]))  # clones: in-place ops on inputs
    mod, params = from_pytorch(model, infos, freeze_params=freeze)
    feeds = {n: t.numpy() for n, t in zip(names, inputs)}
    got = relay.create_executor("debug", mod).evaluate()(**feeds, **params)
    _compare(_as_list(got) if len(want) > 1 else [got], want, rtol, atol)
    if build and _build_available():
        _compare(_run_built(mod, params, feeds, len(want)), want, rtol, atol)
    return mod, params


# ------------------------------------------------------------------------------------------------
# single ops
UNARY = {
    "relu": torch.relu, "relu6": F.relu6, "hardtanh": lambda x: F.hardtanh(x, -0.3, 0.4),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.13), "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "elu": lambda x: F.elu(x, 0.7), "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=1.5), "erf": torch.erf,
    "exp": torch.exp, "log": lambda x: torch.log(x.abs() + 0.1),
    "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.5),
    "pow2": lambda x: x.pow(2), "pow3": lambda x: x ** 3.0,
    "pow_tensor": lambda x: (x.abs() + 0.5) ** x, "abs": torch.abs, "neg": torch.neg,
    "mish": F.mish, "clamp": lambda x: x.clamp(-0.2, 0.3), "clamp_min": lambda x: x.clamp(min=0.1),
    "reciprocal": lambda x: torch.reciprocal(x + 5.0), "floor_ceil": lambda x: x.floor() + x.ceil(),
    "dropout": lambda x: F.dropout(x, 0.5, training=False),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    _check(UNARY[name], [_rand((3, 1, 7))])


BINARY = {
    "add": lambda a, b: a + b, "add_alpha": lambda a, b: torch.add(a, b, alpha=2.5),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=0.5), "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 0.5), "rsub_scalar": lambda a, b: 2.0 - a + b,
    "scalars": lambda a, b: (a * 3 + 1.5) / 2 - b * 0.25, "max": torch.maximum,
    "where": lambda a, b: torch.where(a > b, a, b), "where_scalar": lambda a, b: torch.where(a > 0, a, 0.5),
    "masked_fill": lambda a, b: a.masked_fill(b > 0.2, -1.25), "compare": lambda a, b: (a >= b),
    "div_floor": lambda a, b: torch.div(a, b.abs() + 0.5, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b.abs() + 0.5, rounding_mode="trunc"),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(name):
    _check(BINARY[name], [_rand((2, 1, 5)), _rand((3, 1))])


def test_integer_ops_and_casts():
    def f(i, x):
        y = i * 2 + 1                   # int64 stays int64
        z = i / 2                       # true division -> float
        return y, z + x, (i > 2).to(torch.float32) * x, x.to(torch.float64), x.type_as(z), i // 3
    _check(f, [_rand((4, 3), "int64", high=9), _rand((4, 3))])


CONV = {
    "conv1d": (nn.Conv1d(4, 6, 3, padding=2, dilation=2, groups=2), (2, 4, 11)),
    "conv2d": (nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 0)), (1, 3, 9, 7)),
    "conv2d_dilated": (nn.Conv2d(4, 4, 3, padding=2, dilation=2, bias=False), (2, 4, 7, 5)),
    "conv2d_grouped": (nn.Conv2d(6, 9, 3, padding=1, groups=3), (1, 6, 5, 5)),
    "conv2d_depthwise": (nn.Conv2d(5, 5, 3, stride=2, padding=1, groups=5), (1, 5, 9, 9)),
    "conv2d_same": (nn.Conv2d(3, 4, 4, padding="same"), (1, 3, 7, 6)),
    "conv_transpose2d": (nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                            groups=2), (1, 4, 5, 3)),
    "conv_transpose1d": (nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1), (2, 3, 7)),
}


@pytest.mark.parametrize("name", sorted(CONV))
def test_conv(name):
    m, shape = CONV[name]
    _check(m, [_rand(shape)])


def _bn(c):
    bn = nn.BatchNorm2d(c)
    bn.running_mean.copy_(torch.randn(c) * 0.1)
    bn.running_var.copy_(torch.rand(c) + 0.5)
    nn.init.normal_(bn.weight)
    nn.init.normal_(bn.bias)
    return bn


NORM = {
    "batch_norm": (_bn(3), (2, 3, 4, 5)),
    "batch_norm_1d": (nn.BatchNorm1d(4).eval(), (3, 4)),
    "layer_norm": (nn.LayerNorm(7), (2, 3, 7)),
    "layer_norm_2d": (nn.LayerNorm((3, 7), elementwise_affine=True), (2, 3, 7)),
    "group_norm": (nn.GroupNorm(2, 6), (2, 6, 3, 5)),
    "softmax": (nn.Softmax(dim=1), (2, 5, 3)),
    "log_softmax": (nn.LogSoftmax(dim=-1), (2, 5, 3)),
}


@pytest.mark.parametrize("name", sorted(NORM))
def test_norm(name):
    m, shape = NORM[name]
    _check(m, [_rand(shape)])


POOL = {
    "max_pool": lambda x: F.max_pool2d(x, 3, 2, 1),
    "max_pool_ceil": lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True),
    "max_pool_ceil_drop": lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "avg_pool": lambda x: F.avg_pool2d(x, 2),
    "avg_pool_pad": lambda x: F.avg_pool2d(x, 3, 2, 1),
    "avg_pool_pad_exclude": lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    "adaptive_avg_1": lambda x: F.adaptive_avg_pool2d(x, 1),
    "adaptive_avg_2x3": lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
    "nearest_x2": lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
    "nearest_size": lambda x: F.interpolate(x, size=(11, 4), mode="nearest"),
    "bilinear": lambda x: F.interpolate(x, size=(11, 13), mode="bilinear", align_corners=False),
    "bilinear_ac": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
    # an output axis of length 1: torch samples the middle (half_pixel), not row 0
    "bilinear_to_1": lambda x: F.interpolate(x, size=(1, 3), mode="bilinear", align_corners=False),
    "bilinear_ac_to_1": lambda x: F.interpolate(x, size=(5, 1), mode="bilinear",
                                                align_corners=True),
    "pad": lambda x: F.pad(x, (1, 2, 0, 3), value=0.5),
    "pad_negative": lambda x: F.pad(x, (-1, 2)),
}


@pytest.mark.parametrize("name", sorted(POOL))
def test_pool_resize_pad(name):
    _check(POOL[name], [_rand((1, 3, 7, 9))])


REDUCE = {
    "mean": lambda x: x.mean((1, -1), keepdim=True), "mean_all": lambda x: x.mean(),
    "sum": lambda x: x.sum(0), "sum_all": lambda x: x.sum(), "amax": lambda x: x.amax(-1),
    "amin": lambda x: x.amin((0, 2), keepdim=True), "argmax": lambda x: x.argmax(1),
    "argmax_all": lambda x: x.argmax(), "argmin_keep": lambda x: x.argmin(-1, keepdim=True),
    "prod": lambda x: x.prod(2), "max_dim": lambda x: x.max(1), "max_all": lambda x: x.max(),
    "var": lambda x: x.var(1), "std": lambda x: x.std(-1, unbiased=False, keepdim=True),
    "any": lambda x: (x > 1).any(1), "cumsum": lambda x: x.cumsum(1),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce(name):
    _check(REDUCE[name], [_rand((3, 5, 2))])


SHAPE = {
    "view": lambda x: x.view(5, -1), "reshape_flatten": lambda x: x.reshape(-1, 10).flatten(),
    "permute": lambda x: x.permute(2, 0, 1), "transpose": lambda x: x.transpose(0, 2).contiguous(),
    "t": lambda x: x[0].t(), "expand": lambda x: x[:, :1].expand(2, 3, 5, 2),
    "unsqueeze_squeeze": lambda x: x.unsqueeze(1).squeeze(1).unsqueeze(-1).squeeze(),
    "cat": lambda x: torch.cat([x, x * 2], dim=1), "stack": lambda x: torch.stack([x, -x], 2),
    "split": lambda x: x.split(2, dim=1), "split_sizes": lambda x: x.split([1, 4], dim=1),
    "chunk": lambda x: x.chunk(2, dim=0), "unbind": lambda x: x.unbind(2),
    "slice": lambda x: x[1:, ::2, -1:], "select": lambda x: x[:, -2], "clone": lambda x: x.clone(),
    "index_select": lambda x: x.index_select(1, torch.tensor([4, 0, 2])),
    "index_list": lambda x: x[:, [3, -1]],
    "gather": lambda x: torch.gather(x, 1, torch.tensor([[[0, 1], [4, 3]]] * 3)),
    "repeat_flip": lambda x: x.repeat(1, 2, 1).flip(0),
    "arange_const": lambda x: x + torch.arange(2, dtype=torch.float32),
    "full_like": lambda x: x + torch.full_like(x, 0.5) - torch.zeros_like(x),
}


@pytest.mark.parametrize("name", sorted(SHAPE))
def test_shape_ops(name):
    _check(SHAPE[name], [_rand((3, 5, 2))])


EXTRA = {  # modules and functions whose ops torch decomposes before conversion, and a few more
    "prelu": (nn.PReLU(3), [(2, 3, 4)]), "pixel_shuffle": (nn.PixelShuffle(2), [(1, 8, 3, 3)]),
    "normalize": (lambda x: F.normalize(x, dim=1), [(3, 5)]),
    "cosine": (lambda a, b: F.cosine_similarity(a, b), [(3, 4), (3, 4)]),
    "einsum": (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [(2, 3, 4), (2, 4, 5)]),
    "mha_seq_first": (nn.MultiheadAttention(8, 2), [(5, 1, 8)] * 3),
    "lstm": (nn.LSTM(4, 3, batch_first=True), [(1, 2, 4)]),
    "round": (lambda x: torch.round(x * 2.5) + torch.round(x, decimals=1), [(3, 4)]),
    "log2_exp2": (lambda x: torch.log2(x.abs() + 1) + torch.exp2(x), [(3, 4)]),
    "var_mean": (lambda x: torch.var_mean(x, 1), [(3, 4)]),
    "norms": (lambda x: (x.norm(dim=1), x.norm(p=1), x.norm(p=3, dim=0)), [(3, 4)]),
    "adaptive_max": (nn.AdaptiveMaxPool2d(1), [(1, 3, 4, 5)]),
    "max_pool1d": (nn.MaxPool1d(3, 2), [(1, 3, 9)]), "avg_pool1d": (nn.AvgPool1d(3, 2), [(1, 3, 9)]),
    "conv3d": (nn.Conv3d(2, 3, 2), [(1, 2, 3, 4, 4)]),
    "instance_norm": (nn.InstanceNorm2d(3, affine=True), [(2, 3, 4, 5)]),
    "selu_celu_logsigmoid": (nn.Sequential(nn.SELU(), nn.CELU(0.7), nn.LogSigmoid()), [(3, 4)]),
    "glu": (nn.GLU(), [(3, 4)]), "tril_triu": (lambda x: torch.tril(x) + torch.triu(x, 1), [(4, 4)]),
    "reflect_replicate_pad": (nn.Sequential(nn.ReflectionPad2d((1, 2, 1, 0)),
                                            nn.ReplicationPad2d(1)), [(1, 2, 4, 5)]),
    "inplace_on_input": (nn.SiLU(inplace=True), [(3, 4)]),
    "roll_narrow": (lambda x: x.roll(1, 1).narrow(1, 1, 2), [(3, 4)]),
    "tensors_made_in_forward": (lambda x: x + torch.zeros(3, 5) + torch.ones(x.shape[0], 1)
                                + x.new_full((1, 5), 0.25), [(3, 5)]),
}


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_decomposed_and_extra_ops(name):
    m, shapes = EXTRA[name]
    _check(m, [_rand(s) for s in shapes])


def test_matmul_family():
    def f(a, b, v):
        return a @ b, torch.bmm(a, b), a[0] @ b[0], a[0].mm(b[0]), a @ v, b[0].t() @ v, \
            torch.matmul(a[0], b)
    _check(f, [_rand((2, 3, 4)), _rand((2, 4, 5)), _rand((4,))])


def test_linear_ranks():
    lin = nn.Linear(6, 3)
    _check(lambda x, y, z: (lin(x), lin(y), lin(z)), [_rand((6,)), _rand((2, 6)), _rand((2, 3, 6))])
    _check(nn.Linear(5, 2, bias=False), [_rand((4, 5))])
    w, b = _rand((3, 4)), _rand((3,))
    _check(lambda x: torch.addmm(b, x, w.t(), beta=0.5, alpha=2.0), [_rand((2, 4))])


def test_embedding_and_int_inputs():
    emb = nn.Embedding(11, 4)
    _check(lambda i, x: emb(i) * x, [_rand((2, 7), "int64", high=11), _rand((2, 7, 1))])


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(causal):
    _check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
           [_rand((1, 2, 5, 8)), _rand((1, 2, 5, 8)), _rand((1, 2, 5, 3))])


def test_sdpa_masks_and_scale():
    bool_mask = torch.from_numpy(RNG.random((5, 7)) > 0.3)
    bool_mask[:, 0] = True
    float_mask = _rand((1, 1, 5, 7))
    _check(lambda q, k, v: (F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask),
                            F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask,
                                                           scale=0.3)),
           [_rand((2, 3, 5, 4)), _rand((2, 3, 7, 4)), _rand((2, 3, 7, 6))])


def test_inplace_and_training_ir_ops_are_functionalized():
    class M(nn.Module):
        def forward(self, x):
            y = x.clone()
            y.add_(1.0)
            y.mul_(2.0)
            return torch.relu_(y)
    _check(M(), [_rand((2, 3))])
    _check(nn.Sequential(nn.Conv2d(2, 3, 1), nn.ReLU(inplace=True), nn.Dropout(0.2)),
           [_rand((1, 2, 3, 3))])


# ------------------------------------------------------------------------------------------------
# sorting, scatters, advanced indexing (relay has no sort/scatter op: built from comparisons)
def _ints(values):
    return torch.tensor(values, dtype=torch.int64)


def _distinct_index(shape, dim, size):
    """An int64 index of ``shape`` whose entries along ``dim`` are distinct values in
    [0, size): torch leaves plain-scatter and index_put targets written twice undefined."""
    shape = tuple(shape)
    keys = RNG.random(shape[:dim] + (size,) + shape[dim + 1:]).argsort(axis=dim)
    return torch.from_numpy(np.take(keys, range(shape[dim]), axis=dim).astype(np.int64))


SORT = {  # distinct random floats: torch's order of equal elements is unspecified (not stable)
    "topk": (lambda x: torch.topk(x, 3), [(3, 1, 7)]),
    "topk_smallest_dim0": (lambda x: torch.topk(x, 2, 0, largest=False), [(5, 1, 3)]),
    "topk_all_negative_dim": (lambda x: torch.topk(x, 5, -3), [(5, 2, 3)]),
    "topk_k0": (lambda x: torch.topk(x, 0, 1), [(2, 3)]),
    "topk_unsorted_values": (lambda x: torch.topk(x, 3, 1, sorted=False)[0].sort(1)[0], [(2, 7)]),
    "sort": (torch.sort, [(3, 1, 7)]),
    "sort_descending_dim": (lambda x: torch.sort(x, 1, descending=True), [(2, 5, 3)]),
    "sort_size1_axis": (lambda x: torch.sort(x, 1), [(3, 1)]),
    "sort_0d": (lambda x: torch.sort(x.sum()), [(3,)]),
    "argsort": (lambda x: torch.argsort(x, -2, descending=True), [(4, 3)]),
    "msort": (torch.msort, [(5, 2)]),
}


@pytest.mark.parametrize("name", sorted(SORT))
def test_sort_topk(name):
    f, shapes = SORT[name]
    _check(f, [_rand(s) for s in shapes])


def test_stable_sort_ties_nan_and_integers():
    """stable=True keeps equal elements in index order, descending too; NaN sorts after every
    number (before, descending), -0.0 equals 0.0; integer and bool inputs."""
    def f(x, i, b):
        return (torch.sort(x, stable=True), torch.sort(x, dim=0, descending=True, stable=True),
                torch.argsort(x, dim=1, stable=True), torch.sort(i, dim=-1, stable=True),
                torch.sort(i, dim=0, descending=True, stable=True),
                torch.sort(b, dim=1, stable=True),
                torch.topk(x[:, :4], 2, 1))  # NaN is the largest, no other ties there
    x = torch.tensor([[1.5, float("nan"), -0.0, 0.0, 1.5, float("nan"), -2.0, float("inf")],
                      [0.0, 1.5, 1.5, -0.0, float("-inf"), 2.0, 0.0, 1.5],
                      [-1.0, 3.0, float("nan"), 2.0, -1.0, -1.0, 0.5, -1.0]])
    _check(f, [x, _rand((5, 13), "int64", high=3), _rand((3, 7), "bool")], build=True)


SCATTER = {  # name: (fn(x, src, index), self shape, src shape, index)
    "src": (lambda x, u, i: torch.scatter(x, 1, i, u), (3, 7), (4, 5), _distinct_index((2, 4), 1, 7)),
    "src_dim_neg3": (lambda x, u, i: torch.scatter(x, -3, i, u), (5, 2, 3), (3, 2, 3),
                     _distinct_index((3, 2, 2), 0, 5)),
    "src_size1": (lambda x, u, i: torch.scatter(x, 0, i, u), (1, 4), (1, 4), _ints([[0, 0, 0, 0]])),
    "value": (lambda x, u, i: torch.scatter(x, 0, i, -2.5), (5, 3), (1,), _distinct_index((3, 3), 0, 5)),
    "reduce_add": (lambda x, u, i: torch.scatter(x, 1, i, u, reduce="add"), (3, 5), (3, 7),
                   _ints([[1, 1, 1, 0, 1, 4, 4], [0, 0, 2, 2, 2, 2, 3]])),
    "value_multiply": (lambda x, u, i: torch.scatter(x, 1, i, 1.5, reduce="multiply"), (3, 5),
                       (1,), _ints([[1, 1, 4], [0, 0, 0], [2, 3, 2]])),
    "scatter_add": (lambda x, u, i: torch.scatter_add(x, 0, i, u), (4, 3), (6, 3),
                    _ints([[3, 0, 3], [3, 1, 0], [0, 1, 1], [3, 3, 3], [2, 0, 0]])),
    "constant_index": (lambda x, u, i: torch.scatter(x, 1, _ints([[2, 0], [1, 3]]), u), (2, 5),
                       (2, 2), _ints([0])),
}


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("name", sorted(SCATTER))
def test_scatter(name):
    f, xs, us, i = SCATTER[name]
    _check(f, [_rand(xs), _rand(us), i])


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_scatter_reduce(reduce, dtype):
    """Duplicate indices count; include_self False leaves unhit positions alone; integer mean
    floor-divides (negative values included)."""
    i = _ints([[2, 2, 0, 2], [0, 4, 0, 4], [1, 1, 1, 1]])  # row 3 of self is never hit

    def f(x, u, i):
        return (torch.scatter_reduce(x, 0, i, u, reduce),
                torch.scatter_reduce(x, 0, i, u, reduce, include_self=False),
                torch.scatter_reduce(x.t(), -1, i.t(), u.t(), reduce, include_self=False))
    if dtype == "int64":
        x, u = _rand((5, 4), dtype, high=9) - 4, _rand((3, 4), dtype, high=9) - 4
    else:
        x, u = _rand((5, 4)), _rand((3, 4))
    _check(f, [x, u, i])


def test_scatter_bool_and_nan():
    """bool scatters (sum is "or"); amax/amin propagate NaN as torch does."""
    i = _ints([[0, 1, 0], [0, 2, 2]])

    def f(b, c, x, u):
        return (torch.scatter(b, 1, i, c), torch.scatter_reduce(b, 1, i, c, "sum"),
                torch.scatter_reduce(x, 1, i, u, "amax"),
                torch.scatter_reduce(x, 1, i, u, "amin", include_self=False))
    x = torch.tensor([[1.0, float("nan"), 2.0], [0.5, -1.0, 3.0]])
    u = torch.tensor([[float("nan"), 4.0, 0.0], [1.0, -2.0, 5.0]])
    _check(f, [_rand((2, 3), "bool"), _rand((2, 3), "bool"), x, u], build=True)


def _setitem(key):
    def f(x, v, *idx):
        y = x.clone()
        y[key(*idx)] = v
        return y
    return f


INDEX = {  # name: (fn(x, *index tensors), x shape, index tensors)
    "adjacent": (lambda x, i, j: x[:, i, j], (3, 4, 5), [_ints([[0], [3], [-1]]), _ints([4, -5])]),
    "split_axes": (lambda x, i, j: x[i, :, j], (3, 2, 5), [_ints([[0], [2]]), _ints([1, -1, 3])]),
    "three": (lambda x, i, j, k: x[i, j, k], (2, 3, 7), [_ints([1, 0, 1]), _ints([2]),
                                                          _ints([[6], [0]])]),
    "ellipsis_last": (lambda x, i: x[..., i], (2, 1, 3), [_ints([[2, 0], [1, 1]])]),
    "0d_index": (lambda x, i, j: torch.ops.aten.index.Tensor(x, [i, j]), (4, 5),
                 [_ints(3), _ints([0, 4, -1])]),
    "int32_indices": (lambda x, i, j: x[j, i], (5, 4), [torch.tensor([1, 2], dtype=torch.int32),
                                                        torch.tensor([[4], [0]], dtype=torch.int32)]),
    "constant_indices": (lambda x: x[_ints([[0], [2]]), :, _ints([1, -1])], (3, 2, 5), []),
    "int_tensor": (lambda x, i: x[i, i], (3, 3), [_ints([[2, 0], [1, 1]])]),
}


@pytest.mark.parametrize("name", sorted(INDEX))
def test_advanced_index(name):
    f, xs, idx = INDEX[name]
    _check(f, [_rand(xs)] + idx)


@pytest.mark.parametrize("mode", ["bicubic", "bicubic_align_corners"])
def test_bicubic_interpolation(mode):
    """upsample_bicubic2d decomposes into index.Tensor with two broadcast index tensors."""
    ac = mode.endswith("corners")
    _check(lambda x: F.interpolate(x, size=(5, 7), mode="bicubic", align_corners=ac),
           [_rand((1, 2, 3, 4))], build=True)
    _check(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=ac),
           [_rand((2, 1, 3, 1))])


PUT = {  # name: (fn(x, v, *index tensors), x shape, v shape, index tensors)
    "setitem_split_axes": (_setitem(lambda i, j: (i, slice(None), j)), (3, 2, 5), (2, 1, 2),
                           [_ints([[0], [2]]), _ints([1, -1])]),
    "setitem_adjacent_broadcast": (_setitem(lambda i, j: (slice(None), i, j)), (2, 4, 3), (1,),
                                   [_ints([3, 0, -1]), _ints([2, 2, 0])]),
    "setitem_constant_mask_per_element": (
        lambda x, v: _setitem(lambda: torch.tensor([[True, False, True]] * 2))(x, v), (2, 3, 2),
        (4, 2), []),
    "accumulate_duplicates": (lambda x, v, i, j: torch.index_put(x, (i, j), v, accumulate=True),
                              (3, 2, 5), (2, 3, 5), [_ints([[0], [0]]), _ints([1, 1, 0])]),
    "accumulate_int": (lambda x, v, i: torch.index_put(x.long(), (i,), v.long(), accumulate=True),
                       (4, 3), (3,), [_ints([3, -1, 0, 3])]),
    "runtime_mask_scalar": (lambda x, v: _setitem(lambda: x > 0)(x, 0.5), (3, 1, 4), (1,), []),
    "runtime_mask_accumulate": (
        lambda x, v: torch.index_put(x, (x[:, 0] > 0,), v, accumulate=True), (3, 4), (4,), []),
    "runtime_mask_row_values": (lambda x, v: _setitem(lambda: x.sum(-1) > 0)(x, v), (3, 4, 5),
                                (5,), []),
    "index_copy": (lambda x, v, i: torch.index_copy(x, 1, i, v), (2, 5, 1), (2, 3, 1),
                   [_distinct_index((3,), 0, 5)]),
    "index_copy_0d": (lambda x, v, i: torch.index_copy(x, 0, i, v), (3, 2), (1, 2), [_ints(2)]),
    "index_add_alpha": (lambda x, v, i: torch.index_add(x, -1, i, v, alpha=-1.5), (2, 3), (2, 5),
                        [_ints([2, 0, 2, 2, 1])]),
    "index_add_int": (lambda x, v, i: torch.index_add(x.int(), 0, i, v.int(), alpha=3), (4, 2),
                      (3, 2), [_ints([1, 1, 3])]),
    "index_fill": (lambda x, v, i: torch.index_fill(x, 1, i, -1.25), (3, 4), (1,),
                   [_ints([3, -4, 3])]),
    "index_fill_tensor": (lambda x, v, i: torch.index_fill(x, 0, i, v[0]), (3, 2), (1,),
                          [_ints([2])]),
}


@pytest.mark.parametrize("name", sorted(PUT))
def test_index_put(name):
    f, xs, vs, idx = PUT[name]
    _check(f, [_rand(xs), _rand(vs)] + idx)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce(reduce):
    i = _ints([3, 0, 3, 3, 1])  # row 2 never hit, row 3 three times

    def f(x, v, n, w):
        with warnings.catch_warnings():  # "index_reduce() is in beta"
            warnings.simplefilter("ignore")
            return (torch.index_reduce(x, 0, i, v, reduce),
                    torch.index_reduce(x, 0, i, v, reduce, include_self=False),
                    torch.index_reduce(n, 1, i, w, reduce, include_self=False))
    _check(f, [_rand((4, 3)), _rand((5, 3)), _rand((2, 4), "int64", high=9) - 4,
               _rand((2, 5), "int64", high=9) - 4])


def test_index_errors_name_the_node():
    """What depends on data the converters cannot see is refused by name, never guessed."""
    def masked(x, v):
        y = x.clone()
        y[x > 0] = v
        return y
    with pytest.raises(PyTorchConvertError, match=r"index_put.*own value"):
        from_pytorch(Fn(masked).eval(), [("x", (3, 4)), ("v", (3,))])
    with pytest.raises(PyTorchConvertError, match=r"scatter_reduce.*mean.*bool"):
        from_pytorch(Fn(lambda x, i: torch.scatter_reduce(x > 0, 0, i, x < 0, "mean")).eval(),
                     [("x", (3, 4)), ("i", ((3, 4), "int64"))])
    with pytest.raises((ValueError, OpNotImplemented)):  # data-dependent output shape
        from_pytorch(Fn(lambda x: x[x > 0]).eval(), [("x", (3, 4))])


@pytest.mark.parametrize("pad", ["replication1d", "reflection1d", "replication3d",
                                 "reflection2d_negative"])
def test_reflection_replication_pads_are_nn_pad(pad):
    """reflection/replication pads map to nn.pad with pad_mode reflect/edge (compiled where
    relay.build has their compute)."""
    m, shape, mode = {
        "replication1d": (nn.ReplicationPad1d((1, 2)), (2, 3, 4), "edge"),
        "reflection1d": (nn.ReflectionPad1d((3, 1)), (2, 3, 4), "reflect"),
        "replication3d": (nn.ReplicationPad3d((1, 0, 2, 1, 0, 1)), (1, 2, 3, 1, 2), "edge"),
        "reflection2d_negative": (lambda x: F.pad(x, (-1, 2, 1, 0), mode="reflect"), (1, 2, 3, 4),
                                  "reflect")}[pad]
    mod, _ = _check(m, [_rand(shape)])
    assert f'pad_mode="{mode}"' in str(mod) and "nn.pad" in str(mod)


# ------------------------------------------------------------------------------------------------
# whole models
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = _bn(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = _bn(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), _bn(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18's layout (stem, 4 stages of 2 BasicBlocks, pool, fc) at a given width."""

    def __init__(self, width=64, classes=10):
        super().__init__()
        w = [width, width * 2, width * 4, width * 8]
        self.stem = nn.Sequential(nn.Conv2d(3, w[0], 7, 2, 3, bias=False), _bn(w[0]),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], w[0]
        for i, c in enumerate(w):
            layers += [BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)]
            cin = c
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(w[3], classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = nn.Sequential(
            nn.Conv2d(cin, hid, 1, bias=False), _bn(hid), nn.ReLU6(inplace=True),
            nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False), _bn(hid), nn.ReLU6(True),
            nn.Conv2d(hid, cout, 1, bias=False), _bn(cout))

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), _bn(16), nn.ReLU6())
        self.blocks = nn.Sequential(InvertedResidual(16, 16, 1, 1), InvertedResidual(16, 24, 2, 6),
                                    InvertedResidual(24, 24, 1, 6), InvertedResidual(24, 32, 2, 6))
        self.head = nn.Sequential(nn.Conv2d(32, 64, 1, bias=False), _bn(64), nn.ReLU6())
        self.fc = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 10))

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(x.mean([2, 3]))


def test_small_cnn():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), _bn(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 4, 3), nn.Hardswish(), nn.Flatten(), nn.Linear(4 * 3 * 3, 5),
                      nn.Softmax(-1))
    mod, params = _check(m, [_rand((2, 3, 10, 10))], names=["image"], build=True)
    assert mod["main"].params[0].name_hint == "image"
    assert set(params) == {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                           "1.running_var", "4.weight", "4.bias", "7.weight", "7.bias"}
    for k, v in m.state_dict().items():
        if k in params:
            np.testing.assert_array_equal(params[k], v.numpy())


def test_resnet18_shaped():
    _check(ResNet18(width=8), [_rand((1, 3, 32, 32))], names=["input"], rtol=1e-4, atol=1e-4,
           build=True)


def test_mobilenet_v2_blocks():
    _check(MobileNetV2Blocks(), [_rand((1, 3, 32, 32))], rtol=1e-4, atol=1e-4, build=True)


class EncoderLayer(nn.Module):
    """A BERT-style post-norm encoder layer written out: attention, gelu MLP, layer norms."""

    def __init__(self, d=32, heads=4, ff=64):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.h, self.dh).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / self.dh ** 0.5 + (1.0 - mask[:, None, None, :]) * -1e4
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.out(y))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


def test_bert_encoder_layer_handwritten():
    mask = torch.ones(2, 7)
    mask[1, 5:] = 0
    _check(EncoderLayer(), [_rand((2, 7, 32)), mask], names=["x", "mask"], rtol=1e-4,
           atol=1e-4, build=True)


def test_transformer_encoder_layer():
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, activation="gelu")
    _check(layer, [_rand((2, 5, 16))], rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------
# other entry points and options
def test_exported_program_and_fx_graph_module():
    m = nn.Sequential(nn.Linear(4, 3), nn.Tanh()).eval()
    x = _rand((2, 4))
    want = m(x).detach().numpy()
    ep = torch.export.export(m, (x,))
    for model, infos in [(ep, None), (ep, [("x", (2, 4))]), (torch.fx.symbolic_trace(m),
                                                              [("x", (2, 4))])]:
        mod, params = from_pytorch(model, infos)
        name = mod["main"].params[0].name_hint
        got = relay.create_executor("debug", mod).evaluate()(**{name: x.numpy()}, **params)
        np.testing.assert_allclose(_np(got), want, rtol=1e-5, atol=1e-6)


def test_nested_outputs_flattened():
    _check(lambda x: {"a": x + 1, "b": (x * 2, [x - 1])}, [_rand((2, 3))])


def test_freeze_params_embeds_weights():
    mod, params = _check(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), [_rand((2, 4))], freeze=True)
    assert params == {}
    assert [p.name_hint for p in mod["main"].params] == ["x0"]


def test_printed_module_names_params():
    mod, _ = from_pytorch(nn.Sequential(nn.Conv2d(2, 3, 1)).eval(), [("data", (1, 2, 4, 4))])
    text = str(mod)
    assert "%data" in text and "%0.weight" in text and "nn.conv2d" in text


# ------------------------------------------------------------------------------------------------
# errors
def test_unsupported_ops_listed_once():
    def f(x):
        a = torch.special.i0(x)       # unsupported
        b = torch.special.i0(x * 2)   # unsupported, second node
        c = torch.fft.fft(x).real     # unsupported
        return a + b + c
    with pytest.raises(OpNotImplemented) as ei:
        from_pytorch(Fn(f).eval(), [("x", (3, 4))])
    msg = str(ei.value)
    assert "aten.i0.default: i0, i0_1" in msg
    assert "fft" in msg and "from_pytorch" in msg


def test_bad_inputs():
    m = nn.Linear(4, 3).eval()
    with pytest.raises(ValueError, match="input_infos has 2 entries"):
        from_pytorch(m, [("x", (2, 4)), ("y", (2, 4))])
    with pytest.raises(TypeError, match=r"input_infos\[0\]"):
        from_pytorch(m, [(None, (2, 4))])
    with pytest.raises(TypeError, match="shape must be a sequence of ints"):
        from_pytorch(m, [("x", "2x4")])
    with pytest.raises(ValueError, match="duplicate input names"):
        from_pytorch(Fn(lambda a, b: a + b).eval(), [("x", (2,)), ("x", (2,))])
    with pytest.raises(ValueError, match="input_infos .* required"):
        from_pytorch(m)
    with pytest.raises(TypeError, match="must be a torch.nn.Module"):
        from_pytorch(lambda x: x, [("x", (2, 4))])
    with pytest.raises(TypeError, match="must be a torch.nn.Module"):
        from_pytorch("model.pt", [("x", (2, 4))])
    with pytest.raises(ValueError, match="export.export failed"):
        from_pytorch(m, [("x", (2, 5))])
    with pytest.raises(ValueError, match="training mode"):
        from_pytorch(nn.Linear(4, 3).train(), [("x", (2, 4))])
    with pytest.raises(ValueError, match="also a parameter name"):
        from_pytorch(m, [("weight", (2, 4))])
    ep = torch.export.export(m, (torch.randn(2, 4),))
    with pytest.raises(ValueError, match=r"input_infos gives float32\[3, 4\]"):
        from_pytorch(ep, [("x", (3, 4))])
    with pytest.raises(ValueError, match=r"input_infos has 2 entries \['a', 'b'\], the model"):
        from_pytorch(ep, [("a", (2, 4)), ("b", (2, 4))])
    with pytest.raises(ValueError, match="dtype 'complex64' is not supported"):
        from_pytorch(m, [("x", ((2, 4), "complex64"))])


def test_unsupported_argument_value_names_node():
    with pytest.raises(PyTorchConvertError, match="divisor_override"):
        from_pytorch(Fn(lambda x: F.avg_pool2d(x, 2, divisor_override=3)).eval(),
                     [("x", (1, 1, 4, 4))])
    with pytest.raises(PyTorchConvertError, match="scale_factor"):
        from_pytorch(Fn(lambda x: F.interpolate(x, scale_factor=1.7)).eval(),
                     [("x", (1, 1, 4, 4))])


def test_custom_convert_map_adds_an_op():
    from tvmpy.relay.op import tensor

    def i0_as_exp(node, args):  # a stand-in conversion, checked against torch.exp below
        return tensor.exp(args["self"])

    mod, params = from_pytorch(Fn(lambda x: torch.special.i0(x) + 1).eval(), [("x", (2, 3))],
                               custom_convert_map={torch.ops.aten.i0.default: i0_as_exp})
    x = _rand((2, 3))
    got = relay.create_executor("debug", mod).evaluate()(x.numpy())
    np.testing.assert_allclose(_np(got), (torch.exp(x) + 1).numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="custom_convert_map keys"):
        from_pytorch(nn.ReLU().eval(), [("x", (2,))], custom_convert_map={"i0": i0_as_exp})


def test_float64_model_and_int32_indices():
    m = nn.Sequential(nn.Linear(5, 4), nn.GELU()).double()
    _check(m, [_rand((3, 5), "float64")])
    table = _rand((6, 3))
    _check(lambda i: table[i], [_rand((2, 4), "int32", high=6)])


# ---- symbolic dims (torch.export dynamic_shapes) ------------------------------------------------
def _dynamic_check(model, example, shapes, sizes, rtol=1e-4, atol=1e-5):
    """Export ``model`` with ``dynamic_shapes``, convert once, build once, then run at every
    input tuple of ``sizes`` against eager torch."""
    model = model.eval()
    ep = torch.export.export(model, example, dynamic_shapes=shapes)
    mod, params = from_pytorch(ep)
    assert any(not isinstance(d, int) for d in mod["main"].params[0].checked_type.shape)
    for inputs in sizes:
        with torch.no_grad():
            want = _as_list(model(*inputs))
        names = [p.name_hint for p in mod["main"].params[:len(inputs)]]
        got = _run_built(mod, params, {n: x.numpy() for n, x in zip(names, inputs)}, len(want))
        _compare(got, want, rtol, atol)
    return mod


class _SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.bn = nn.BatchNorm2d(5)
        self.fc = nn.Linear(5 * 3 * 3, 4)

    def forward(self, x):
        y = F.adaptive_avg_pool2d(F.relu(self.bn(self.conv(x))), 3)
        return self.fc(y.view(y.shape[0], -1)).softmax(-1)


def test_dynamic_batch_cnn():
    """One build serves batch 1, 3 and 7 (a view of the symbolic batch: ``y.view(N, -1)``)."""
    batch = torch.export.Dim("batch", min=1, max=16)
    mod = _dynamic_check(_SmallCNN(), (_rand((2, 3, 7, 5)),), ({0: batch},),
                         [(_rand((n, 3, 7, 5)),) for n in (1, 3, 7)])
    assert "?" in str(mod["main"].params[0].checked_type)


class _Block(nn.Module):
    """A pre-norm transformer block over (batch, seq, 16) with learned positions sliced to seq
    (a slice by a symbolic bound) and an arange over it."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, 32, 16))
        self.ln = nn.LayerNorm(16)
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(16, 24), nn.GELU(), nn.Linear(24, 16))

    def forward(self, x):
        n = x.shape[1]
        x = x + self.pos[:, :n] + torch.arange(n, dtype=torch.float32)[None, :, None] * 0.01
        h = self.ln(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln(x))


def test_dynamic_seq_transformer_block():
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        b, s = torch.export.Dim("batch", max=8), torch.export.Dim("seq", max=32)
        _dynamic_check(_Block(), (_rand((2, 5, 16)),), ({0: b, 1: s},),
                       [(_rand(shape),) for shape in ((1, 1, 16), (3, 7, 16), (2, 13, 16))])
    finally:
        torch.backends.mha.set_fastpath_enabled(True)


def test_dynamic_symbolic_reshape_view():
    """Sizes computed from SymInts (sym_size, mul, sub) reach view/reshape/expand/slice."""
    class Views(nn.Module):
        def forward(self, x, y):
            b, n = x.shape[0], x.shape[1]
            z = x.transpose(1, 2).reshape(b * 3, n)[:, : n - 1]               # (3b, n - 1)
            w = y.expand(b, n, 3) * x                                         # y: (1, 1, 3)
            return z.reshape(b, -1).cumsum(-1), w.view(-1, 3)[: b * n - 1]

    batch = torch.export.Dim("batch", min=1, max=8)
    seq = torch.export.Dim("seq", min=3, max=16)
    _dynamic_check(Views(), (_rand((2, 4, 3)), _rand((1, 1, 3))),
                   ({0: batch, 1: seq}, None),
                   [(_rand((n, m, 3)), _rand((1, 1, 3))) for n, m in ((1, 3), (3, 11), (5, 6))])


def test_dynamic_negative_index_over_symbolic_dim():
    """Advanced indexing with negative indices over a symbolic dim: the dim's run-time size
    as a relay scalar (a kernel whose only symbolic size is an intermediate's)."""
    class Pick(nn.Module):
        def forward(self, x, idx):
            return x[:, idx] * 2

    seq = torch.export.Dim("seq", min=3, max=32)
    idx = torch.tensor([-1, 0, -3, 2])
    _dynamic_check(Pick(), (_rand((2, 5)), idx), ({1: seq}, None),
                   [(_rand((2, n)), idx) for n in (3, 7, 11)])


def test_dynamic_export_with_guards():
    """A model whose export records guards (torch._check, a branch on a size): the program's
    range constraints and _assert_scalar nodes convert (torch checked them) and the answer is
    right at sizes within the range."""
    class Guarded(nn.Module):
        def forward(self, x):
            torch._check(x.shape[0] >= 2)
            if x.shape[1] > 4:  # specialized to the branch taken (the Dim's min is 5)
                x = x * 2
            return x[1:] - x[:-1], x.mean(0)

    # (b = 2 would make x[1:] a size-1 dim torch specializes: the range starts at 3)
    b, s = torch.export.Dim("b", min=3, max=20), torch.export.Dim("s", min=5, max=30)
    ep = torch.export.export(Guarded(), (_rand((3, 6)),), dynamic_shapes=({0: b, 1: s},))
    assert ep.range_constraints
    _dynamic_check(Guarded(), (_rand((3, 6)),), ({0: b, 1: s},),
                   [(_rand(shape),) for shape in ((3, 5), (7, 11), (20, 30))])


def test_dynamic_input_infos_names_and_fixes_dims():
    """input_infos on a dynamic program: a name keeps the dim symbolic (and names it), an int
    specializes it, a wrong static dim is refused; an nn.Module with a named dim is exported
    with a torch.export.Dim."""
    batch = torch.export.Dim("batch", max=8)
    ep = torch.export.export(nn.Linear(4, 2).eval(), (torch.randn(3, 4),),
                             dynamic_shapes=({0: batch},))
    mod, _ = from_pytorch(ep, [("data", (["N", 4], "float32"))])
    p = mod["main"].params[0]
    assert p.name_hint == "data" and str(p.checked_type.shape[0]).startswith("N")
    mod, _ = from_pytorch(ep, [("data", [5, 4])])
    assert [int(d) for d in mod["main"].params[0].checked_type.shape] == [5, 4]
    with pytest.raises(ValueError, match="input_infos gives"):
        from_pytorch(ep, [("data", [5, 3])])
    with pytest.raises(TypeError, match="shape must be a sequence of ints"):
        from_pytorch(ep, [("data", (["2n", 4], "float32"))])
    mod, params = from_pytorch(nn.Linear(4, 2).eval(), [("x", ([None, 4], "float32"))])
    assert not isinstance(mod["main"].params[0].checked_type.shape[0], int)


class ManyOps(nn.Module):
    """A mix of non-conv ops through the compiled path."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.gn = nn.GroupNorm(3, 6)
        self.emb = nn.Embedding(7, 5)

    def forward(self, x, idx):
        y = F.silu(self.gn(self.up(x)))                               # 1x6x10x14
        y = F.interpolate(y, size=(5, 7), mode="bilinear") + F.avg_pool2d(y, 2)
        y = F.pad(y, (1, 0, 2, 1), value=-0.5).amax(1)               # 1x8x8
        z = torch.cat([y, y.transpose(1, 2)], dim=-1).softmax(-1)    # 1x8x16
        e = self.emb(idx).sum(1, keepdim=True)                        # 1x1x5
        return z[:, 1:7:2, ::3] * 2 - e.mean(), torch.where(z > 0.07, z, -z).cumsum(-1)


def test_many_ops_compiled():
    _check(ManyOps(), [_rand((1, 4, 5, 7)), _rand((1, 3), "int64", high=7)], build=True)


GROUPS = {  # every single-op case of a table in one model, for the compiled path
    "unary": (UNARY, [(3, 1, 7)]), "binary": (BINARY, [(2, 1, 5), (3, 1)]),
    "pool_resize_pad": (POOL, [(1, 3, 7, 9)]), "reduce": (REDUCE, [(3, 5, 2)]),
    "shape": (SHAPE, [(3, 5, 2)]),
}


@pytest.mark.skipif(not _build_available(), reason="relay.build is not available")
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_op_tables_compiled(group):
    table, shapes = GROUPS[group]
    fns = [table[k] for k in sorted(table)]
    _check(lambda *xs: tuple(f(*xs) for f in fns), [_rand(s) for s in shapes], build=True)


@pytest.mark.skipif(not _build_available(), reason="relay.build is not available")
def test_conv_norm_tables_compiled():
    mods = {k: CONV[k] for k in sorted(CONV)} | {k: NORM[k] for k in sorted(NORM)}
    inputs = [_rand(shape) for _, shape in mods.values()]
    ms = nn.ModuleList([m for m, _ in mods.values()]).eval()
    _check(lambda *xs: tuple(m(x) for m, x in zip(ms, xs)), inputs, build=True)


@pytest.mark.skipif(not _build_available(), reason="relay.build is not available")
@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_sort_scatter_index_tables_compiled():
    """Every case of the sorting, scatter and indexing tables in one compiled model."""
    cases = [(f, [_rand(s) for s in shapes]) for f, shapes in (SORT[k] for k in sorted(SORT))]
    cases += [(f, [_rand(xs), _rand(us), i]) for f, xs, us, i in
              (SCATTER[k] for k in sorted(SCATTER))]
    cases += [(f, [_rand(xs)] + idx) for f, xs, idx in (INDEX[k] for k in sorted(INDEX))]
    cases += [(f, [_rand(xs), _rand(vs)] + idx) for f, xs, vs, idx in (PUT[k] for k in sorted(PUT))]

    def model(*xs):
        outs, k = [], 0
        for f, ins in cases:
            outs.append(f(*xs[k:k + len(ins)]))
            k += len(ins)
        return tuple(outs)
    _check(model, [t for _, ins in cases for t in ins], build=True)
