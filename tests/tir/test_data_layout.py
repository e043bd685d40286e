"""tir/data_layout.py: the one parser of the blocked layout names (issue 30: ``NCHW(\\d+)c`` was
parsed in five places)."""

import pytest

from tvmpy.tir.data_layout import block_of, blocked


@pytest.mark.parametrize("c", [1, 3, 8, 16, 61])
def test_round_trip(c):
    assert block_of(blocked(c)) == c
    for base in ("NCW", "NCHW", "NCDHW"):
        assert block_of(blocked(c, base), base) == c


@pytest.mark.parametrize("layout", [None, "", "NCHW", "NHWC", "NCHWc", "NCHW16", "NCHW16cc",
                                    "xNCHW16c", "NCHW-4c", "NCHW16C", "NCW16c", "OIHW16i16o"])
def test_not_blocked(layout):
    assert block_of(layout) is None


def test_base_is_literal():
    assert block_of("NCHW8c", "NCW") is None and block_of("NCW8c", "NCHW") is None
    assert block_of("N.HW8c", "N.HW") == 8 and block_of("NCHW8c", "N.HW") is None
