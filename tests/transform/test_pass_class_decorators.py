"""TVM's pass decorators on a class (``module_pass``, ``relay.transform.function_pass``,
``tir.transform.prim_func_pass``): the decorated class is a pass class whose constructor
arguments go to the user's class, and whose instances are passes of the right kind."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te


def _relay_mod():
    x = relay.var("x", shape=(3, 7))
    return tvm.IRModule.from_expr(relay.Function([x], relay.multiply(x, relay.const(2.0))))


def _eval(mod, x):
    out = relay.create_executor("debug", mod=mod).evaluate()(x)
    return out.numpy() if hasattr(out, "numpy") else np.asarray(out)


def test_function_pass_class_takes_constructor_args():
    @relay.transform.function_pass(opt_level=1)
    class ScaleConstants:
        """Multiplies every scalar constant by ``factor``."""

        def __init__(self, factor):
            self.factor = factor
            self.seen = 0

        def transform_function(self, func, mod, ctx):
            outer = self

            class Mut(relay.ExprMutator):
                def visit_constant(self, c):
                    outer.seen += 1
                    return relay.const(c.data.numpy() * outer.factor)

            return Mut().visit(func)

    assert isinstance(ScaleConstants, type) and ScaleConstants.__name__ == "ScaleConstants"
    assert ScaleConstants.__doc__.startswith("Multiplies")
    p = ScaleConstants(5.0)
    assert isinstance(p, relay.transform.FunctionPass)
    assert p.info.name == "ScaleConstants" and p.info.opt_level == 1
    assert p.factor == 5.0  # the user's attributes read through the pass
    x = np.random.default_rng(1).standard_normal((3, 7)).astype("float32")
    out = p(_relay_mod())
    assert p.seen == 1
    tvm.testing.assert_allclose(_eval(out, x), x * 10.0, rtol=1e-6)
    tvm.testing.assert_allclose(_eval(ScaleConstants(-1.0)(_relay_mod()), x), x * -2.0)
    # a Sequential gates it by opt_level like any pass
    with tvm.transform.PassContext(opt_level=0):
        same = tvm.transform.Sequential([ScaleConstants(3.0)])(_relay_mod())
    tvm.testing.assert_allclose(_eval(same, x), x * 2.0)


def test_module_pass_class_and_function():
    @tvm.transform.module_pass(opt_level=2, name="AddFunc")
    class AddFunc:
        def __init__(self, fname):
            self.fname = fname

        def transform_module(self, mod, ctx):
            out = mod.copy()
            out[self.fname] = mod["main"]
            return out

    p = AddFunc("other")
    assert isinstance(p, tvm.transform.ModulePass) and p.info.name == "AddFunc"
    assert p.info.opt_level == 2
    out = p(_relay_mod())
    assert [g.name_hint for g in out.get_global_vars()] == ["main", "other"]

    @tvm.transform.module_pass(opt_level=0)
    def identity(mod, ctx):
        return mod

    assert isinstance(identity, tvm.transform.ModulePass) and identity.info.name == "identity"


def test_prim_func_pass_class():
    @tvm.tir.transform.prim_func_pass(opt_level=0)
    class Tag:
        def __init__(self, value):
            self.value = value

        def transform_function(self, func, mod, ctx):
            return func.with_attr("tag", self.value)

    a = te.placeholder((4,), name="a")
    b = te.compute((4,), lambda i: a[i] + 1, name="b")
    mod = tvm.lower(te.create_schedule(b.op), [a, b])
    if not isinstance(mod, tvm.IRModule):
        mod = tvm.IRModule({"main": mod})
    p = Tag(7)
    assert isinstance(p, tvm.tir.transform.PrimFuncPass) and p.value == 7
    out = p(mod)
    assert all(f.attrs["tag"] == 7 for _, f in out.items())


def test_bad_decorator_arguments():
    with pytest.raises(TypeError, match="must define transform_function"):
        @relay.transform.function_pass(opt_level=1)
        class NoMethod:
            pass
    with pytest.raises(TypeError, match="must define transform_module"):
        tvm.transform.module_pass(type("Empty", (), {}), opt_level=1)
    with pytest.raises(TypeError, match="takes a function or a class"):
        relay.transform.function_pass(3, opt_level=1)
