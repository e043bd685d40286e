"""The strategy layer's structure (issue 30 point 1): one file per target kind registering
explicit strategy functions, one hook for tuned implementations, no target writing into the
generic tables or reaching for another module's private names."""

import ast
import pathlib

import pytest

import tvmpy as tvm
from tvmpy import relay, te, topi
from tvmpy.relay.backend import placeholders_for
from tvmpy.relay.op import strategy
from tvmpy.relay.op.strategy import (
    register_tuned_implementation,
    select_implementation,
    tuned_implementation,
)
from tvmpy.relay.op.strategy.generic import schedule_injective
from tvmpy.relay.type_infer import infer_type

PKG = pathlib.Path(strategy.__file__).parent


def _typed_call(expr):
    return infer_type(relay.Function(relay.analysis.free_vars(expr), expr)).body


def _impl(call, target):
    return select_implementation(call.op, call.attrs, placeholders_for(call), call.checked_type,
                                 target)


def test_no_strategy_module_imports_a_private_name_of_another():
    bad = []
    for path in sorted(PKG.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                bad += [f"{path.name}: {a.name}" for a in node.names
                        if a.name.startswith("_") and a.name != "__future__"]
    assert not bad, bad


def test_only_generic_writes_the_compute_table():
    bad = []
    for path in sorted(PKG.glob("*.py")):
        if path.name == "generic.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if isinstance(t, ast.Subscript) and getattr(t.value, "id", "") == "COMPUTES":
                    bad.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "update" and getattr(node.func.value, "id", "") \
                    == "COMPUTES":
                bad.append(f"{path.name}:{node.lineno}")
    assert not bad, bad


@pytest.mark.parametrize("groups,oc,want", [
    (1, 6, "schedule_conv2d_nchw"),
    (8, 8, "schedule_depthwise_conv2d_nchw"),
    (2, 6, "schedule_group_conv2d_nchw"),
], ids=["plain", "depthwise", "grouped"])
def test_conv2d_strategy_cpu_chooses_by_attributes(groups, oc, want):
    x = relay.var("x", shape=(1, 8, 7, 5))
    w = relay.var("w", shape=(oc, 8 // groups, 3, 3))
    call = _typed_call(relay.nn.conv2d(x, w, padding=(1, 1, 1, 1), groups=groups))
    impl = _impl(call, "llvm")
    assert impl.name == "nn.conv2d.x86"
    assert impl.schedule.__name__ == want


def test_conv2d_layout_error_names_the_layout():
    x = relay.var("x", shape=(1, 7, 5, 8))
    w = relay.var("w", shape=(3, 3, 8, 4))
    call = _typed_call(relay.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWIO"))
    for target in ("llvm", "opencl", "llvm -keys=other"):
        with pytest.raises(NotImplementedError, match="NHWC/HWIO"):
            _impl(call, target)


def test_default_strategy_takes_the_targets_pattern_schedule():
    """An op with no strategy of a target's own is scheduled, also alone (lower_call), with the
    injective schedule that target registers (before: the generic one unless the target
    re-registered every op)."""
    def mykey_injective(attrs, outs, target):
        return topi.generic.schedule_injective(outs)

    schedule_injective.register("s_strategy_key", mykey_injective)
    try:
        x = relay.var("x", shape=(3, 5))
        add = _typed_call(relay.add(x, x))
        assert _impl(add, "llvm -keys=s_strategy_key").schedule is mykey_injective
        assert _impl(add, "llvm -keys=other").schedule is schedule_injective.fdefault
    finally:
        del schedule_injective.dispatch_dict["s_strategy_key"]


def test_tuned_implementation_hook():
    with pytest.raises(KeyError, match="no_such.x86"):
        tuned_implementation("no_such.x86", None, [], None, "llvm")
    with pytest.raises(ValueError, match="already registered"):
        register_tuned_implementation("dense.x86", lambda *a: None)
    # every template a strategy file asks for is registered (the names are AutoTVM's tasks)
    asked = set()
    for path in sorted(PKG.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") \
                    == "tuned_implementation" and isinstance(node.args[0], ast.Constant):
                asked.add(node.args[0].value)
    assert asked and asked <= set(strategy._TUNED), asked - set(strategy._TUNED)


@pytest.mark.parametrize("shape,want", [((4, 8), "dense.x86"), (("n", 8), None)],
                         ids=["static", "symbolic"])
def test_cpu_dense_template_only_for_constant_shapes(shape, want):
    from tvmpy.autotvm.task.topi_integration import get_workload

    dims = tuple(te.var(d) if isinstance(d, str) else d for d in shape)
    x = relay.var("x", shape=tuple(relay.Any() if isinstance(d, str) else d for d in shape))
    call = _typed_call(relay.nn.dense(x, relay.var("w", shape=(5, 8))))
    ins = [te.placeholder(dims, name="x"), te.placeholder((5, 8), name="w")]
    impl = select_implementation(call.op, call.attrs, ins, call.checked_type, "llvm")
    assert impl.name == "nn.dense.x86"
    outs = impl.compute(call.attrs, ins, call.checked_type)
    wkl = get_workload(outs)
    assert (wkl[0] if wkl is not None else None) == want


def test_contrib_dense_pack_has_one_compute_on_every_target():
    """nn.contrib_dense_pack: the generic compute (also the plain x86 one) and the x86 template
    compute the same values."""
    import numpy as np

    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (3, 7)).astype("float32")
    w = rng.uniform(-1, 1, (5, 7)).astype("float32")
    nr = 4
    packed = np.zeros((2, 7, nr), "float32")
    for j in range(5):
        packed[j // nr, :, j % nr] = w[j]
    x = relay.var("x", shape=(3, 7))
    p = relay.var("p", shape=(2, 7, nr))
    call = _typed_call(relay.nn.contrib_dense_pack(x, p, units=5))
    for target in ("llvm", "llvm -keys=other"):
        impl = _impl(call, target)
        ins = placeholders_for(call)
        outs = impl.compute(call.attrs, ins, call.checked_type)
        mod = tvm.build(impl.schedule(call.attrs, outs, tvm.target.Target(target)),
                        [*ins, *outs], "llvm")
        res = tvm.nd.array(np.zeros((3, 5), "float32"))
        mod(a, packed, res)
        np.testing.assert_allclose(res.numpy(), a @ w.T, rtol=1e-5, atol=1e-5)
