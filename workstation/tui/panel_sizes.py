"""The review screen's panel sizes in the wide layout, as pure arithmetic on a ``sizes``
table (cells): ``spec`` (the spec panel's height; the diff takes the rest of the left
column), ``timing`` and ``rubric`` (heights in the right column; the checks take the rest),
``right`` (the right column's width). The screen owns the table and lays it out."""

from __future__ import annotations

#: the panels whose keys grow their own height, and the one each shares it with.
RIGHT_COLUMN = ("checks", "timing", "rubric", "profile")


def resized(sizes: dict[str, int], panel: str, delta: int, height: int) -> None:
    """Grow (``delta`` > 0) or shrink the focused ``panel`` by ``delta`` rows in a screen of
    ``height`` rows: the spec and the diff trade rows, as do the checks and the timing or
    profile panel; every panel keeps at least 3 rows and the other column part 6 or 8."""
    h = max(10, height - 2)
    if panel == "spec":
        sizes["spec"] = min(max(3, sizes["spec"] + delta), h - 6)
    elif panel == "diff":
        sizes["spec"] = min(max(3, sizes["spec"] - delta), h - 6)
    elif panel in ("timing", "rubric", "profile"):
        key = "timing" if panel == "profile" else panel
        sizes[key] = min(max(3, sizes[key] + delta), h - 8)
    elif panel == "checks":
        sizes["timing"] = max(3, sizes["timing"] - delta)


def widened(sizes: dict[str, int], panel: str, delta: int, width: int) -> None:
    """Widen (``delta`` > 0) the column holding ``panel`` by ``delta`` cells in a screen of
    ``width`` cells; each column keeps at least 40."""
    on_right = panel in RIGHT_COLUMN
    sizes["right"] = min(max(40, sizes["right"] + (delta if on_right else -delta)), width - 40)
