"""The relay text printer: TVM's format, exact text for small graphs."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.relay.transform import InferType


def _mod(params, body):
    return InferType()(tvm.IRModule.from_expr(relay.Function(params, body)))


def test_conv_relu_module_text():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    assert str(_mod([x, w], y)) == (
        "def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) "
        "-> Tensor[(1, 4, 8, 8), float32] {\n"
        "  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]) /* ty=Tensor[(1, 4, 8, 8), float32] */;\n"
        "  nn.relu(%0) /* ty=Tensor[(1, 4, 8, 8), float32] */\n"
        "}"
    )


def test_untyped_function_and_non_default_attrs():
    x = relay.var("x", shape=(1, 16, 9, 9))
    w = relay.var("w", shape=(16, 1, 3, 3))
    y = relay.nn.conv2d(x, w, strides=2, padding=1, groups=16, channels=16, kernel_size=(3, 3))
    p = relay.nn.max_pool2d(y, pool_size=2, layout="NCHW")
    assert str(relay.Function([x, w], p)) == (
        "fn (%x: Tensor[(1, 16, 9, 9), float32], %w: Tensor[(16, 1, 3, 3), float32]) {\n"
        "  %0 = nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 1, 1, 1], groups=16, "
        "channels=16, kernel_size=[3, 3]);\n"
        "  nn.max_pool2d(%0, pool_size=[2, 2])\n"
        "}"
    )


def test_shared_nodes_print_once_and_constants():
    x = relay.var("x", shape=(2, 3))
    c = relay.const(np.arange(3, dtype="float32"))
    a = relay.add(x, c)
    b = relay.multiply(a, a)
    out = relay.subtract(relay.add(b, c), relay.const(1.5))
    text = str(relay.Function([x], out))
    assert text == (
        "fn (%x: Tensor[(2, 3), float32]) {\n"
        "  %0 = add(%x, meta[relay.Constant][0]);\n"
        "  %1 = multiply(%0, %0);\n"
        "  %2 = add(%1, meta[relay.Constant][0]);\n"
        "  subtract(%2, 1.5f)\n"
        "}"
    )
    assert str(relay.const(np.int64(7))) == "7i64"
    assert str(relay.const(3)) == "3"
    assert str(relay.const(True)) == "True"


def test_tuple_let_nested_function():
    x = relay.var("x", shape=(1, 3))
    t = relay.Tuple([x, relay.nn.relu(x)])
    v = relay.var("v")
    p = relay.var("p", shape=(1, 3))
    inner = relay.Function([p], relay.exp(p)).with_attr("Primitive", 1)
    body = relay.Let(v, relay.TupleGetItem(t, 1), relay.Call(inner, [v]))
    mod = _mod([x], body)
    assert str(mod) == (
        "def @main(%x: Tensor[(1, 3), float32]) -> Tensor[(1, 3), float32] {\n"
        "  %0 = nn.relu(%x) /* ty=Tensor[(1, 3), float32] */;\n"
        "  %1 = (%x, %0) /* ty=(Tensor[(1, 3), float32], Tensor[(1, 3), float32]) */;\n"
        "  %2 = %1.1 /* ty=Tensor[(1, 3), float32] */;\n"
        "  let %v = %2;\n"
        "  %3 = fn (%p: Tensor[(1, 3), float32], Primitive=1) -> Tensor[(1, 3), float32] {\n"
        "    exp(%p) /* ty=Tensor[(1, 3), float32] */\n"
        "  } /* ty=fn (Tensor[(1, 3), float32]) -> Tensor[(1, 3), float32] */;\n"
        "  %3(%v) /* ty=Tensor[(1, 3), float32] */\n"
        "}"
    )


def test_if_and_scalar_types():
    c = relay.var("c", shape=(), dtype="bool")
    x = relay.var("x", shape=(2,))
    e = relay.If(c, relay.exp(x), relay.sum(relay.cast(x, "float16")).astype("float32") * x)
    text = str(_mod([c, x], e))
    assert text == (
        "def @main(%c: bool, %x: Tensor[(2), float32]) -> Tensor[(2), float32] {\n"
        "  if (%c) {\n"
        "    exp(%x) /* ty=Tensor[(2), float32] */\n"
        "  } else {\n"
        '    %0 = cast(%x, dtype="float16") /* ty=Tensor[(2), float16] */;\n'
        "    %1 = sum(%0) /* ty=float16 */;\n"
        '    %2 = cast(%1, dtype="float32") /* ty=float32 */;\n'
        "    multiply(%2, %x) /* ty=Tensor[(2), float32] */\n"
        "  } /* ty=Tensor[(2), float32] */\n"
        "}"
    )


def test_symbolic_dims_and_module_with_two_functions():
    n = te.var("n")
    a = relay.var("a", shape=(n, 4))
    mod = tvm.IRModule()
    mod["double"] = relay.Function([a], relay.add(a, a))
    x = relay.var("x", shape=(n, 4))
    mod["main"] = relay.Function([x], relay.Call(mod.get_global_var("double"), [x]))
    mod = InferType()(mod)
    assert str(mod) == (
        "def @double(%a: Tensor[(n, 4), float32]) -> Tensor[(n, 4), float32] {\n"
        "  add(%a, %a) /* ty=Tensor[(n, 4), float32] */\n"
        "}\n\n"
        "def @main(%x: Tensor[(n, 4), float32]) -> Tensor[(n, 4), float32] {\n"
        "  @double(%x) /* ty=Tensor[(n, 4), float32] */\n"
        "}"
    )
    assert "/* ty" not in mod.astext(show_types=False)


def test_resnet_stem_is_readable():
    rng = np.random.default_rng(0)
    x = relay.var("input", shape=(1, 3, 32, 32))
    w = relay.const(rng.standard_normal((8, 3, 7, 7)).astype("float32"))
    g, b, m, v = (relay.const(rng.random(8).astype("float32")) for _ in range(4))
    y = relay.nn.conv2d(x, w, strides=2, padding=3, channels=8, kernel_size=7)
    y = relay.nn.relu(relay.nn.batch_norm(y, g, b, m, v)[0])
    y = relay.nn.max_pool2d(y, pool_size=3, strides=2, padding=1)
    lines = str(_mod([x], y)).splitlines()
    assert lines[0] == ("def @main(%input: Tensor[(1, 3, 32, 32), float32]) -> "
                        "Tensor[(1, 8, 8, 8), float32] {")
    assert lines[2] == (
        "  %1 = nn.batch_norm(%0, meta[relay.Constant][1], meta[relay.Constant][2], "
        "meta[relay.Constant][3], meta[relay.Constant][4]) /* ty=(Tensor[(1, 8, 16, 16), float32], "
        "Tensor[(8), float32], Tensor[(8), float32]) */;"
    )
    assert lines[-2] == ("  nn.max_pool2d(%3, pool_size=[3, 3], strides=[2, 2], "
                         "padding=[1, 1, 1, 1]) /* ty=Tensor[(1, 8, 8, 8), float32] */")
    assert lines[-1] == "}"


def test_free_expression_declares_free_vars():
    x = relay.var("x", shape=(2, 3))
    assert str(relay.nn.relu(relay.add(x, relay.const(1.0)))) == (
        "free_var %x: Tensor[(2, 3), float32];\n%0 = add(%x, 1f);\nnn.relu(%0)"
    )
    assert str(x) == "%x"


def _meta_mod():
    x = relay.var("x", shape=(2, 3))
    w = np.random.default_rng(3).standard_normal((2, 3)).astype("float32")
    y = relay.nn.relu(relay.add(x, relay.const(w)))
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], y))), w


def test_astext_show_meta_data_as_tvm():
    import base64
    import json

    mod, w = _meta_mod()
    full = mod.astext()  # TVM's default: show_meta_data=True
    assert full.startswith('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2, 3), float32])')
    assert "add(%x, meta[relay.Constant][0])" in full
    head, meta = full.split("\n#[metadata]\n")
    assert head.endswith("}")
    rec = json.loads(meta)["relay.Constant"][0]
    assert rec["dtype"] == "float32" and rec["shape"] == [2, 3]
    got = np.frombuffer(base64.b64decode(rec["data"]), dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(got, w)

    short = mod.astext(show_meta_data=False)
    assert "#[metadata]" not in short and "metadata section has been omitted" in short
    assert short.startswith('#[version = "0.0.5"]\n')
    # str() is the bare text; astext of an expression or function is framed the same way
    assert str(mod).startswith("def @main") and "metadata" not in str(mod)
    fn_text = mod["main"].astext(show_meta_data=True)
    assert fn_text.startswith('#[version = "0.0.5"]\nfn (%x') and "#[metadata]" in fn_text
    # no constants: no metadata section and no note
    x = relay.var("x", shape=(4,))
    plain = tvm.IRModule.from_expr(relay.Function([x], relay.negative(x))).astext()
    assert "metadata" not in plain


def test_astext_annotate_replaces_type_comments():
    mod, _ = _meta_mod()

    def note(e):
        return f" /* {e.op.name} */" if isinstance(e, relay.Call) else ""

    text = mod.astext(show_meta_data=False, annotate=note)
    assert "%0 = add(%x, meta[relay.Constant][0]) /* add */;" in text
    assert "nn.relu(%0) /* nn.relu */" in text and "ty=" not in text
    with pytest.raises(TypeError, match="annotate must be a function"):
        mod.astext(annotate="yes")


def test_print_ir_show_meta_data(capsys):
    mod, _ = _meta_mod()
    tvm.transform.PrintIR("with meta", show_meta_data=True)(mod)
    assert "#[metadata]" in capsys.readouterr().out
    tvm.transform.PrintIR("without")(mod)
    assert "#[metadata]" not in capsys.readouterr().out
