"""``Problem``: a file kws cannot use, or a part of it it ignores, as (file, key, problem)."""

from __future__ import annotations

from pathlib import Path


class Problem(Exception):
    """A file that does not load, or (collected as a warning) a part of it that is ignored.

    Attributes:
        file: the offending file (or folder).
        key: the dotted key inside it (``"entry.candidate"``, ``"cases[2].N"``,
            ``"fields[3].values[0].key"``), or ``""`` when the whole file is at fault.
        problem: what is wrong, in one sentence.
    """

    def __init__(self, file: Path | str, key: str, problem: str):
        self.file = Path(file)
        self.key = key
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file}: {self.key}" if self.key else str(self.file)
        return f"{where}: {self.problem}"

    def __reduce__(self) -> tuple[type[Problem], tuple[Path, str, str]]:  # picklable across processes (the args differ from Exception's)
        return (type(self), (self.file, self.key, self.problem))

    def as_dict(self) -> dict[str, str]:
        """The problem as JSON-ready data: ``{"file", "key", "problem"}``."""
        return {"file": str(self.file), "key": self.key, "problem": self.problem}

    def under(self, prefix: str) -> Problem:
        """The same problem with ``prefix`` (a dotted key) prepended to its key."""
        key = f"{prefix}.{self.key}" if prefix and self.key and not self.key.startswith("[") else prefix + self.key
        return Problem(self.file, key, self.problem)
