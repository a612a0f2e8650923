"""kws's content-addressed cache (engine/kwscache.py, issue 42) and bounds-proof's proofs in
it: hits, misses, a changed entry refused, the size cap, ``kws cache clear``."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from workstation.engine import kwscache


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    yield kwscache.root()


def test_a_value_put_is_read_back_and_a_key_never_put_is_a_miss(store):
    k = kwscache.key_of("proof", "ttir text", [1, 2], {"b": 1, "a": 2})
    assert k == kwscache.key_of("proof", "ttir text", [1, 2], {"a": 2, "b": 1})  # key order does not matter
    assert kwscache.get_json("proofs", k) is None
    assert kwscache.put_json("proofs", k, {"verdicts": [], "accesses": 3})
    assert kwscache.get_json("proofs", k) == {"verdicts": [], "accesses": 3}
    assert kwscache.get_json("proofs", kwscache.key_of("another")) is None


def test_an_entry_changed_on_disk_is_a_miss_and_is_removed(store):
    k = kwscache.key_of("x")
    kwscache.put("steps", k, b'{"ok": true}')
    (entry,) = store.glob("steps/*/*.entry")
    entry.write_bytes(entry.read_bytes().replace(b"true", b"fals"))  # same length, other bytes
    assert kwscache.get("steps", k) is None
    assert not entry.exists()


def test_unknown_namespaces_and_keys_that_are_not_hex_are_refused(store):
    with pytest.raises(ValueError, match="namespace"):
        kwscache.get("elsewhere", kwscache.key_of("x"))
    with pytest.raises(ValueError, match="hex"):
        kwscache.put("proofs", "../../etc/passwd", b"")


def test_the_store_is_trimmed_to_its_cap_least_recently_used_first(store, monkeypatch):
    keys = [kwscache.key_of(i) for i in range(4)]
    for i, k in enumerate(keys):
        kwscache.put("proofs", k, bytes(1000))
        p = next(store.glob(f"proofs/*/{k}.entry"))
        os.utime(p, (1_000_000 + i, 1_000_000 + i))  # put in this order
    os.utime(next(store.glob(f"proofs/*/{keys[0]}.entry")), (2_000_000, 2_000_000))  # the first used again
    size = next(store.glob("proofs/*/*.entry")).stat().st_size
    kwscache.trim(2 * size)
    left = {k for k in keys if kwscache.get("proofs", k) is not None}
    assert left == {keys[0], keys[3]}


def test_kws_cache_shows_and_clears_the_store(store):
    from workstation.cli.cache import cache_group

    kwscache.put_json("proofs", kwscache.key_of(1), [1])
    kwscache.put_json("steps", kwscache.key_of(2), [2])
    shown = CliRunner().invoke(cache_group, [])
    assert shown.exit_code == 0 and "proofs" in shown.output and "1 entries" in shown.output
    cleared = CliRunner().invoke(cache_group, ["clear"])
    assert cleared.exit_code == 0 and "removed 2 entries" in cleared.output
    assert kwscache.usage() == {"proofs": (0, 0), "steps": (0, 0)}


def test_the_code_digest_names_the_code_that_computed_an_entry():
    a = kwscache.code_digest("workstation.checks.support.boundsmodel", "workstation.checks.support.ttir_z3")
    assert a == kwscache.code_digest("workstation.checks.support.boundsmodel", "workstation.checks.support.ttir_z3")
    assert a != kwscache.code_digest("workstation.checks.support.boundsmodel")


def test_bounds_proof_asks_the_solver_once_per_question(store, monkeypatch):
    from workstation.checks import bounds_proof
    from workstation.checks.support import boundsmodel
    from workstation.checks.support.boundsmodel import Formula, Slot, Verdict

    z3 = pytest.importorskip("z3")
    asked: list[str] = []

    def prove(ttir, slot, params, specs, region, budget=0):
        asked.append(ttir)
        return [Verdict("in-bounds", "proved", "store y", 7, "y"),
                Verdict("coverage", "refuted", "y", 7, "y", counterexample={"params": {"N": 3}})], 2

    monkeypatch.setattr(boundsmodel, "prove_kernel", prove)
    slot = Slot("k", {0: {}}, [Formula("cdiv", ("N",), 128)], {}, {})
    region = [z3.Int("N") >= 1]
    first = bounds_proof.proved_kernel("tt.func @k", slot, ["N"], {}, region)
    again = bounds_proof.proved_kernel("tt.func @k", slot, ["N"], {}, region)
    other = bounds_proof.proved_kernel("tt.func @k2", slot, ["N"], {}, region)
    assert asked == ["tt.func @k", "tt.func @k2"]
    assert (first[2], again[2], other[2]) == (False, True, False)
    assert again[0] == first[0] and again[1] == 2
