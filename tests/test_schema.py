"""The schema layer: guarded TOML reading and struct conversion with (file, key, problem)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pytest

from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys
from workstation.schema.toml import parse_toml, read_toml


class Entry(msgspec.Struct):
    candidate: Annotated[str, msgspec.Meta(description="'file.py:callable'")]
    out_args: list[Annotated[int, msgspec.Meta(ge=0)]] = []


class Doc(msgspec.Struct):
    id: Annotated[str, msgspec.Meta(description="the task id")]
    kind: Literal["a", "b"]
    entry: Entry
    atol: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    title: Annotated[str, msgspec.Meta(max_length=10)] = ""
    tables: dict[str, Entry] = {}


OK = {"id": "x", "kind": "a", "entry": {"candidate": "c.py:f"}}


@pytest.mark.parametrize("data, key, words", [
    ({}, "id", "missing required key (the task id)"),
    ({**OK, "id": 1}, "id", "expected the task id, got an integer 1"),
    ({**OK, "kind": "c"}, "kind", "unknown value 'c'; expected one of a, b"),
    ({**OK, "entry": {"candidate": 3}}, "entry.candidate", "expected 'file.py:callable', got an integer 3"),
    ({**OK, "entry": {"candidate": "c", "out_args": [1, -2]}}, "entry.out_args[1]", "must be >= 0, got -2"),
    ({**OK, "atol": float("nan")}, "atol", "must be a number >= 0, got nan"),
    ({**OK, "atol": True}, "atol", "expected a number, got a boolean"),
    ({**OK, "atol": "abc"}, "atol", "expected a number, got a string 'abc'"),
    ({**OK, "title": "x" * 30}, "title", "must be at most 10 characters long, got 30 characters"),
])
def test_convert_names_key_and_value(data, key, words):
    with pytest.raises(Problem) as e:
        convert(data, Doc, file="task.toml")
    assert e.value.key == key
    assert e.value.problem == words
    assert str(e.value) == f"task.toml: {key}: {words}"


def test_unknown_keys_walk_nested_structs_and_dict_values():
    data = {**OK, "zz": 1, "entry": {"candidate": "c", "q": 2}, "tables": {"f16": {"candidate": "x", "w": 1}}}
    assert unknown_keys(data, Doc) == ["entry.q", "tables.f16.w", "zz"]
    assert unknown_keys(OK, Doc) == []


def test_read_toml_guards(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(Problem) as e:
        read_toml(deep)
    assert e.value.file == deep and "nested" in e.value.problem
    bracketed = tmp_path / "over.toml"
    bracketed.write_text("a = " + "[" * 40 + "]" * 40 + "\n")
    with pytest.raises(Problem) as e:
        read_toml(bracketed, max_depth=32)
    assert e.value.problem == "arrays or inline tables nested 40 levels deep (at most 32)"
    dotted = tmp_path / "dotted.toml"
    dotted.write_text(".".join(f"k{i}" for i in range(40)) + " = 1\n")
    with pytest.raises(Problem) as e:
        read_toml(dotted, max_depth=32)
    assert e.value.key.startswith("k0.k1.") and "more than 32 levels" in e.value.problem
    quoted = tmp_path / "quoted.toml"
    quoted.write_text('s = "' + "[" * 100 + '"\n# ' + "{" * 100 + "\n")
    assert read_toml(quoted, max_depth=32) == {"s": "[" * 100}
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'title = "caf\xe9"\n')
    with pytest.raises(Problem) as e:
        read_toml(latin)
    assert e.value.problem == "not UTF-8 text (byte 0xe9 at offset 12)"
    big = tmp_path / "big.toml"
    big.write_text('title = "' + "x" * 2000 + '"\n')
    with pytest.raises(Problem) as e:
        read_toml(big, max_bytes=1000)
    assert "larger than the 1000-byte limit" in e.value.problem
    with pytest.raises(Problem) as e:
        parse_toml("a = = 1", "x.toml")
    assert e.value.problem.startswith("not valid TOML")
    with pytest.raises(Problem) as e:
        read_toml(tmp_path / "missing.toml")
    assert e.value.problem.startswith("cannot read")


def test_problem_pickles_and_prefixes():
    import pickle

    p = Problem("f.toml", "a.b", "bad")
    q = pickle.loads(pickle.dumps(p))
    assert (q.file, q.key, q.problem) == (p.file, p.key, p.problem)
    assert p.under("fields[1]").key == "fields[1].a.b"
    assert Problem("f", "[2]", "x").under("cases").key == "cases[2]"
