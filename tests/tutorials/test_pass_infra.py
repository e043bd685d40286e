"""Tutorial check: TVM's "How to Use TVM Pass Infra" (our own code, same steps): a small relay
program, module-level passes applied by hand, a Sequential gated by the PassContext
(opt_level, required_pass, disabled_pass), a custom function pass written as a class, PrintIR,
and debugging with an instrument. Numerics against numpy."""

import numpy as np

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor

SHAPE = (1, 3, 7, 5)
RNG = np.random.default_rng(26)
W = RNG.uniform(-0.5, 0.5, (4, 3, 3, 3)).astype("float32")
C1 = RNG.uniform(-1, 1, SHAPE).astype("float32")
C2 = RNG.uniform(-1, 1, SHAPE).astype("float32")


def example():
    """add of two constants (folds), the same add twice (CSE), a convolution (fuses)."""
    x = relay.var("x", shape=SHAPE)
    w = relay.var("w", shape=W.shape)
    c = relay.add(relay.const(C1), relay.const(C2))
    y = relay.multiply(relay.add(x, c), relay.add(x, c))
    z = relay.nn.conv2d(y, w, padding=(1, 1))
    z = relay.add(z, relay.const(1.0))
    return tvm.IRModule.from_expr(relay.Function([x, w], z))


def reference(x, w=W, scale=1.0):
    from tvmpy.topi.testing.nn_ref import conv2d_nchw_python

    y = (x + (C1 + C2) * scale) * (x + (C1 + C2) * scale)
    return conv2d_nchw_python(y, w, 1, 1) + 1.0 * scale


def ops(mod, name):
    n = [0]
    relay.post_order_visit(mod["main"], lambda e: n.__setitem__(0, n[0] + 1) if isinstance(
        e, relay.Call) and getattr(e.op, "name", None) == name else None)
    return n[0]


def run(mod, x, opt_level=3):
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, "llvm", params={"w": W})
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


def test_module_level_passes_by_hand():
    mod = relay.transform.InferType()(example())
    assert ops(mod, "add") == 4
    folded = relay.transform.FoldConstant()(mod)
    assert ops(folded, "add") == 3  # the constant add is one constant now
    cse = relay.transform.EliminateCommonSubexpr()(folded)
    assert ops(cse, "add") == 2  # x + c computed once
    fused = relay.transform.FuseOps(fuse_opt_level=2)(cse)
    prims = [f for f in _functions(fused) if f.attrs.get("Primitive")]
    # four operator calls in two fused functions: (add, multiply) and (conv2d, add)
    assert len(prims) == 2
    x = RNG.uniform(-1, 1, SHAPE).astype("float32")
    tvm.testing.assert_allclose(run(cse, x), reference(x), rtol=1e-4, atol=1e-4)


def _functions(mod):
    out = []
    relay.post_order_visit(mod["main"], lambda e: out.append(e)
                           if isinstance(e, relay.Function) else None)
    return out


def test_sequential_under_pass_context():
    seq = tvm.transform.Sequential([relay.transform.FoldConstant(),
                                    relay.transform.EliminateCommonSubexpr(),
                                    relay.transform.FuseOps(fuse_opt_level=2)])
    mod = relay.transform.InferType()(example())
    # the default context has opt_level 2: EliminateCommonSubexpr (level 3) does not run
    # (the counts include the calls inside the fused functions)
    assert ops(seq(mod), "add") == 3
    with tvm.transform.PassContext(opt_level=3):
        assert ops(seq(mod), "add") == 2
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["EliminateCommonSubexpr"]):
        assert ops(seq(mod), "add") == 3
    with tvm.transform.PassContext(opt_level=1, required_pass=["EliminateCommonSubexpr"]):
        # required beats opt_level; FoldConstant (level 2) is not required: nothing folds,
        # and the two (unfolded) x + c are still merged
        assert ops(seq(mod), "add") == 3
    # AlterOpLayout with a target: the convolution goes to the blocked layout
    with tvm.transform.PassContext(opt_level=3), tvm.target.Target("llvm"):
        altered = tvm.transform.Sequential([relay.transform.AlterOpLayout()])(mod)
    assert ops(altered, "layout_transform") >= 1


def test_custom_function_pass_class():
    @relay.transform.function_pass(opt_level=1)
    class ScaleConstants:
        """Multiply every constant by a factor given at construction."""

        def __init__(self, multiplier):
            self.multiplier = multiplier

        def transform_function(self, func, mod, ctx):
            scale = self.multiplier

            class Rewrite(relay.ExprMutator):
                def visit_constant(self, c):
                    return relay.const(c.data.numpy() * scale)

            return Rewrite().visit(func)

    pass_obj = ScaleConstants(multiplier=0.5)
    assert pass_obj.info.name == "ScaleConstants" and pass_obj.info.opt_level == 1
    mod = pass_obj(example())
    x = RNG.uniform(-1, 1, SHAPE).astype("float32")
    tvm.testing.assert_allclose(run(mod, x), reference(x, scale=0.5), rtol=1e-4, atol=1e-4)


def test_print_ir_and_debugging_instrument(capsys):
    seq = tvm.transform.Sequential([relay.transform.FoldConstant(),
                                    tvm.transform.PrintIR("after fold"),
                                    relay.transform.EliminateCommonSubexpr()])
    with tvm.transform.PassContext(opt_level=3):
        seq(relay.transform.InferType()(example()))
    out = capsys.readouterr().out
    assert "PrintIR(after fold):" in out and "def @main" in out
    # v0.6's spelling, metadata (the folded constant) included by default
    relay.transform.PrintIR()(relay.transform.FoldConstant()(example()))
    assert "#[metadata]" in capsys.readouterr().out

    @tvm.instrument.pass_instrument
    class PrintBeforeAlter:
        """Print the module right before AlterOpLayout runs."""

        def run_before_pass(self, mod, info):
            if info.name == "AlterOpLayout":
                print("before AlterOpLayout:")
                print(mod)

    with tvm.transform.PassContext(opt_level=3, instruments=[PrintBeforeAlter()]):
        lib = relay.build(example(), "llvm", params={"w": W})
    out = capsys.readouterr().out
    assert out.count("before AlterOpLayout:") == 1 and "nn.conv2d" in out
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    x = RNG.uniform(-1, 1, SHAPE).astype("float32")
    m.set_input("x", x)
    m.run()
    tvm.testing.assert_allclose(m.get_output(0).numpy(), reference(x), rtol=1e-4, atol=1e-4)
