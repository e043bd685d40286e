"""tvm.ir.Op, register_op_attr, register_intrin_lowering and custom intrinsics (TVM's usage:
``tvm.ir.Op.get("tir.exp")``, ``register_op_attr("tir.mylog", "TCallEffectKind", Pure)``,
``register_intrin_lowering("tir.exp", target="llvm", f=rule, level=99)``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.ir import op as irop
from tvmpy.ir.digest import structural_digest
from tvmpy.target import intrin as tintrin


@pytest.fixture
def registry():
    """Undo the registrations a test makes (rules and op attributes are process-global)."""
    saved = ({k: dict(v) for k, v in tintrin.RULES.items()}, dict(tintrin._LEVELS),
             {k: dict(v) for k, v in irop._ATTRS.items()}, set(irop._DECLARED))
    yield
    tintrin.RULES.clear()
    tintrin.RULES.update(saved[0])
    tintrin._LEVELS.clear()
    tintrin._LEVELS.update(saved[1])
    irop._ATTRS.clear()
    irop._ATTRS.update(saved[2])
    irop._DECLARED.clear()
    irop._DECLARED.update(saved[3])


def _exp_call():
    x = te.var("x", "float32")
    return te.exp(x)


def test_call_op_is_an_op_equal_to_its_name():
    c = _exp_call()
    assert isinstance(c.op, tvm.ir.Op)
    assert c.op.name == "tir.exp"
    assert c.op == "exp" and hash(c.op) == hash("exp")
    assert c.op in {"exp": 1} and {"exp": 1}[c.op] == 1
    assert tvm.ir.Op.get("tir.exp") is c.op is tvm.ir.op.Op.get("exp")
    assert pickle.loads(pickle.dumps(c.op)) is c.op
    assert pickle.loads(pickle.dumps(c)).op is c.op
    assert f"{c.op}" == "exp" and "exp(" in str(c)
    # the kernel-cache key serialises the op as its name string, as before it was an Op
    plain = tvm.tir.Call.__new__(tvm.tir.Call)
    object.__setattr__(plain, "dtype", c.dtype)
    object.__setattr__(plain, "op", "exp")
    object.__setattr__(plain, "args", c.args)
    assert structural_digest(c) == structural_digest(plain)
    assert tvm.ir.structural_equal(c, tvm.tir.call_intrin("float32", "tir.exp", c.args[0]))


def test_builtin_attrs_and_effect_kind():
    assert tvm.ir.Op.get("tir.exp").get_attr("TCallEffectKind") == tvm.tir.CallEffectKind.Pure
    assert int(tvm.tir.CallEffectKind.Opaque) == 4  # TVM's values
    assert tvm.ir.Op.get("tir.exp").get_attr("NoSuchAttr") is None


def test_unknown_op_and_bad_input_errors():
    with pytest.raises(ValueError, match="register_op_attr"):
        tvm.ir.Op.get("tir.no_such_intrinsic_xyz")
    with pytest.raises(ValueError, match="unknown intrinsic"):
        tvm.tir.call_intrin("float32", "tir.no_such_intrinsic_xyz", 1.0)
    with pytest.raises(ValueError, match="unknown intrinsic"):
        tvm.ir.register_intrin_lowering("tir.no_such_intrinsic_xyz", "llvm", f=lambda c: c)
    with pytest.raises(TypeError, match="op must be"):
        tvm.tir.Call("float32", 3, [])
    with pytest.raises(TypeError, match="attr_key"):
        tvm.ir.register_op_attr("tir.exp", "")


def test_relay_ops_through_ir_op():
    from tvmpy import relay

    assert tvm.ir.Op.get("nn.conv2d") is relay.op.get("nn.conv2d")


def test_register_op_attr_levels(registry):
    tvm.ir.register_op_attr("tir.test_lv", "TCallEffectKind", tvm.tir.CallEffectKind.Pure)
    op = tvm.ir.Op.get("tir.test_lv")
    assert op.name == "tir.test_lv" and op == "test_lv"
    with pytest.raises(ValueError, match="already registered at level 10"):
        tvm.ir.register_op_attr("tir.test_lv", "TCallEffectKind", tvm.tir.CallEffectKind.Opaque)
    tvm.ir.register_op_attr("tir.test_lv", "TCallEffectKind", tvm.tir.CallEffectKind.Opaque, 5)
    assert op.get_attr("TCallEffectKind") == tvm.tir.CallEffectKind.Pure  # lower level: ignored
    tvm.ir.register_op_attr("tir.test_lv", "TCallEffectKind", tvm.tir.CallEffectKind.Opaque, 20)
    assert op.get_attr("TCallEffectKind") == tvm.tir.CallEffectKind.Opaque

    @tvm.ir.register_op_attr("tir.test_lv", "FMyAttr")
    def f(x):
        return x

    assert op.get_attr("FMyAttr") is f


def _build_run(fcompute, x: np.ndarray, target: str = "llvm") -> np.ndarray:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: fcompute(A[i]), name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], target)
    a, b = tvm.nd.array(x), tvm.nd.empty(x.shape, "float32")
    f(a, b)
    return b.numpy()


def test_override_builtin_lowering_on_llvm(registry):
    seen = []

    def rule(call):
        seen.append(call.op.name)
        # exp(x) as 2^(x*log2 e): same value, a different instruction sequence
        return tvm.tir.call_pure_extern("float32", "exp2f", call.args[0] * np.float32(np.log2(np.e)))

    tvm.ir.register_intrin_lowering("tir.exp", target="llvm", f=rule, level=99)
    x = np.random.default_rng(0).uniform(-3, 3, 13).astype("float32")
    tvm.testing.assert_allclose(_build_run(te.exp, x), np.exp(x), rtol=1e-5)
    assert seen and seen[0] == "tir.exp"
    with pytest.raises(ValueError, match="already has a rule"):
        tvm.ir.register_intrin_lowering("tir.exp", target="llvm", f=rule, level=99)
    tvm.ir.register_intrin_lowering("tir.exp", target="llvm", f=lambda c: 1 / 0, level=1)  # ignored
    tvm.testing.assert_allclose(_build_run(te.exp, x), np.exp(x), rtol=1e-5)


def test_custom_intrinsic_with_rule(registry):
    tvm.ir.register_op_attr("tir.test_mylog", "TCallEffectKind", tvm.tir.CallEffectKind.Pure)

    def mylog(x):
        return tvm.tir.call_intrin(x.dtype, "tir.test_mylog", x)

    x = np.random.default_rng(1).uniform(0.1, 5, 17).astype("float32")
    with pytest.raises(ValueError, match="no lowering rule for target 'llvm'"):
        _build_run(mylog, x)

    @tvm.ir.register_intrin_lowering("tir.test_mylog", target="default")
    def rule(call):
        return tvm.tir.call_pure_extern(call.dtype, "logf", call.args[0])

    tvm.testing.assert_allclose(_build_run(mylog, x), np.log(x), rtol=1e-6)
    tvm.testing.assert_allclose(_build_run(mylog, x, "c"), np.log(x), rtol=1e-6)


def test_rule_returning_wrong_type_is_an_error(registry):
    tvm.ir.register_op_attr("tir.test_bad", "TCallEffectKind", tvm.tir.CallEffectKind.Pure)
    tvm.ir.register_intrin_lowering("tir.test_bad", "llvm", f=lambda c: "logf")
    with pytest.raises(TypeError, match="not an expression"):
        _build_run(lambda v: tvm.tir.call_intrin("float32", "tir.test_bad", v),
                   np.ones(3, "float32"))


def test_register_intrin_rule_has_one_home(registry):
    """``tir.transform.register_intrin_rule`` is the target's (issue 30): it checks the
    intrinsic's name and refuses a silent second rule, as ``tvm.target``'s always did."""
    from tvmpy.tir.transform import lower_intrin

    assert tvm.tir.transform.register_intrin_rule is tvm.target.register_intrin_rule
    assert lower_intrin.RULES is tintrin.RULES
    with pytest.raises(ValueError, match="unknown intrinsic"):
        tvm.tir.transform.register_intrin_rule("c", "no_such_intrin", lambda c: c)
    tvm.tir.transform.register_intrin_rule("c", "sigmoid", lower_intrin.GENERIC_RULES["sigmoid"])
    assert tintrin.rules_for("c")["sigmoid"] is lower_intrin.GENERIC_RULES["sigmoid"]
    with pytest.raises(ValueError, match="already has a rule"):
        tvm.tir.transform.register_intrin_rule("c", "sigmoid", lambda c: c)
