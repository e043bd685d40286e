"""``topi.utils.get_const_tuple``: one function, its two contracts chosen by a keyword (issue 30:
topi/nn/utils.py kept a twin that refused symbolic entries)."""

import pytest

from tvmpy import te, topi
from tvmpy.tir import expr as E
from tvmpy.topi.nn import utils as nn_utils
from tvmpy.topi.utils import get_const_tuple


def test_symbolic_entries_kept_by_default():
    n = te.var("n")
    x = te.placeholder((n, 3, 1), name="x")
    got = get_const_tuple(x.shape)
    assert got[1:] == (3, 1) and isinstance(got[1], int)
    assert isinstance(got[0], E.Var) and got[0].same_as(n)


def test_symbolic_entries_refused_when_asked():
    n = te.var("n")
    assert get_const_tuple((E.IntImm("int32", 7), 1), symbolic=False) == (7, 1)
    with pytest.raises(ValueError, match="weight shape must be a constant integer.*n"):
        get_const_tuple((5, n), "weight shape", symbolic=False)


def test_nn_computes_refuse_symbolic_extents_with_the_name():
    """A conv2d kernel with a symbolic extent gets the strict contract's error, naming it."""
    k = te.var("k")
    data = te.placeholder((1, 3, 8, 8), name="data")
    kernel = te.placeholder((4, 3, k, 3), name="kernel")
    with pytest.raises(ValueError, match="must be a constant integer"):
        topi.nn.conv2d_nchw(data, kernel, 1, 0, 1)


def test_one_home():
    assert not hasattr(nn_utils, "get_const_tuple") or nn_utils.get_const_tuple is get_const_tuple
