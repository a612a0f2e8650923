"""Diff rows, hunks, word-level spans and syntax tokens for the source viewer."""

from __future__ import annotations

from workstation.review.diff import diff_files, highlight_lines, listing, word_spans

OLD = """import triton
BLOCK_M = 64
BLOCK_N = 64

def kernel(x):
    acc = 0
    return acc
"""
NEW = """import triton
BLOCK_M = 128
BLOCK_N = 64

def kernel(x):
    acc = tl.zeros((BLOCK_M,), tl.float32)
    acc += 1
    return acc
"""


def test_unified_rows_numbers_and_markers():
    d = diff_files(OLD, NEW, "baseline.py", "candidate.py")
    tags = "".join(r.tag for r in d.unified)
    assert tags == " -+   -++ "
    assert (d.added, d.removed) == (3, 2)
    minus = d.unified[1]
    assert (minus.old_no, minus.new_no, minus.text) == (2, None, "BLOCK_M = 64")
    assert [r.new_no for r in d.unified if r.tag != "-"] == list(range(1, 9))


def test_split_rows_pair_replaced_lines():
    d = diff_files(OLD, NEW, "baseline.py", "candidate.py")
    r = d.split[1]
    assert (r.tag, r.old_text, r.new_text) == ("replace", "BLOCK_M = 64", "BLOCK_M = 128")
    extra = [r for r in d.split if r.tag == "insert"]
    assert len(extra) == 1 and extra[0].new_text == "    acc += 1" and extra[0].old_no is None
    assert len(d.split) == 8  # 7 old lines + 1 extra new one


def test_word_spans_mark_only_the_changed_token():
    so, sn = word_spans("BLOCK_M = 64", "BLOCK_M = 128")
    assert so == ((10, 12),) and sn == ((10, 13),)
    d = diff_files(OLD, NEW, "a.py", "b.py")
    assert d.unified[2].spans == ((10, 13),)
    # unrelated lines get no word spans (the row tag marks the whole line)
    assert word_spans("alpha beta gamma", "totally different text here") == ((), ())


def test_hunks_and_navigation_in_both_views():
    d = diff_files(OLD, NEW, "a.py", "b.py")
    assert [h.header() for h in d.hunks] == ["@@ -2,1 +2,1 @@", "@@ -6,1 +6,2 @@"]
    for split in (False, True):
        rows = d.hunk_rows(split=split)
        assert d.next_hunk(0, split=split) == rows[0]
        assert d.next_hunk(rows[0], split=split) == rows[1]
        assert d.next_hunk(rows[1], split=split) is None
        assert d.next_hunk(rows[1], split=split, forward=False) == rows[0]


def test_row_of_line_maps_both_sides():
    d = diff_files(OLD, NEW, "a.py", "b.py")
    r = d.row_of_line(7, split=False, side="new")
    assert d.unified[r].text == "    acc += 1"
    r = d.row_of_line(6, split=True, side="old")
    assert d.split[r].old_text == "    acc = 0"
    assert d.row_of_line(99, split=False) is None


def test_listing_without_baseline():
    d = listing("a\nb\n", "candidate.py")
    assert d.is_listing and [r.new_no for r in d.unified] == [1, 2] and not d.hunks


def test_highlight_lines_one_token_list_per_line_and_text_preserved():
    src = 'x = """doc\nstring"""\n\tif x:\r\n    pass\n'
    toks = highlight_lines(src, "k.py")
    lines = ["x = \"\"\"doc", "string\"\"\"", "    if x:", "    pass"]
    assert ["".join(t for _, t in line) for line in toks] == lines
    assert any(tt.startswith("Token.Keyword") for tt, _ in toks[2])
    assert highlight_lines("a\nb\n", "notes.unknown-ext") == [[("Token.Text", "a")], [("Token.Text", "b")]]


def test_large_diff_is_computed_once_quickly():
    import time

    big = "".join(f"x{i} = {i}\n" for i in range(20000))
    t = time.perf_counter()
    d = diff_files(big, big.replace("x100 = 100", "x100 = 101"), "a.py", "b.py")
    assert len(d.hunks) == 1 and len(d.unified) == 20001
    assert time.perf_counter() - t < 5.0
