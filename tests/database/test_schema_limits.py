"""The database schema and the directive grammar agree on a schedule's size: a schedule the
grammar accepts (up to LIMITS["directives"]) is one the database stores. The schema allowed 512
where the grammar allows 1024, so a program of 600 directives parsed, compiled and ran, and its
entry was refused as "too long"."""

import copy
import glob
import json
from pathlib import Path

import pypto.database.store as store
from pypto.schedule.directives import LIMITS


def test_schema_allows_as_many_directives_as_the_grammar():
    schema = json.loads(Path(store.__file__).with_name("schema.json").read_text())
    sched = schema["$defs"]["entry"]["properties"]["schedule"]
    assert sched["properties"]["directives"]["maxItems"] == LIMITS["directives"]


def test_an_entry_of_600_directives_validates():
    path = sorted(glob.glob(str(Path(store.__file__).parents[2] / "schedules" / "*" / "*.json")))[0]
    entry = copy.deepcopy(json.loads(Path(path).read_text())["entries"][0])
    ds = entry["schedule"]["directives"]
    entry["schedule"]["directives"] = (ds * (600 // len(ds) + 1))[:600]
    assert store.validate_document(entry, "e", "entry") == []
    entry["schedule"]["directives"] = (ds * (LIMITS["directives"] // len(ds) + 2))
    assert "exceed the limit" in store.validate_document(entry, "e", "entry")[0]
