"""A schedule that holds a huge number or a huge string is refused with a message that names the
value's size instead of printing it."""

import pytest

from pypto.errors import ScheduleError
from pypto.schedule.schedule import Schedule

BIG = 10 ** 4000


@pytest.mark.parametrize("directive, says", [
    ({"op": "split", "func": "out", "args": {"var": "x", "outer": "a", "inner": "b",
                                             "factor": BIG}}, "an integer of 4001 digits"),
    ({"op": "vectorize", "func": "out", "args": {"var": "x", "factor": -BIG}},
     "-an integer of 4001 digits"),
    ({"op": "bound", "func": "out", "args": {"var": "x", "min": BIG, "extent": 4}},
     "an integer of 4001 digits"),
    ({"op": "parallel", "func": "out", "args": {"var": "v" * 100_000}}, "100002 characters"),
    ({"op": "parallel", "func": "o" * 100_000, "args": {"var": "x"}}, "100002 characters"),
    ({"op": "e" * 100_000, "func": "out"}, "100002 characters"),
    ({"op": "store_in", "func": "f", "args": {"memory": "m" * 100_000}}, "100002 characters"),
])
def test_huge_values_are_named_not_printed(directive, says):
    doc = {"format": 1, "op": "toy", "fingerprint": None, "directives": [directive]}
    with pytest.raises(ScheduleError) as info:
        Schedule.from_json(doc)
    message = str(info.value)
    assert says in message
    assert len(message) < 600, message[:700]
