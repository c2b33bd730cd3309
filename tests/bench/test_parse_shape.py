"""parse_shape, which the CLI's --shape goes through: NAME=INT items, each extent in [1, 2**31 - 1]
(Halide's buffer extents are 32-bit), each name once."""

import pytest

from pypto.errors import ShapeError
from pypto.infra.inputs import parse_shape


def test_parses_names_and_extents():
    assert parse_shape("m=4, N=2147483647") == {"M": 4, "N": 2**31 - 1}


@pytest.mark.parametrize("text, message", [
    ("R=0", "must be >= 1"),
    ("R=99999999999999999999,C=8", r"at most 2147483647"),      # a build recorded it before
    ("R=2147483648", r"at most 2147483647"),
    ("R=x", "is not an integer"),
    ("R", "must look like NAME=INT"),
    ("R=2,R=3", "names R twice"),
])
def test_refuses_what_no_array_can_have(text, message):
    with pytest.raises(ShapeError, match=message):
        parse_shape(text)
