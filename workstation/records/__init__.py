"""Reviewers' judgments, kept as append-only records in the queue's git repository.

Owns the verdicts, disputes, resolutions and reservations (one new TOML file and one git
commit each, never edited; format: ``docs/records.md``), and what is built on them:

- :mod:`~workstation.records.model`: the record types and constants (``Verdict``,
  ``Dispute``, ``Resolution``, ``Reservation``, ``TaskFlags``, ``RecordError``, ``SCHEMA``,
  ``FOLDERS``, ``OUTCOMES``);
- :mod:`~workstation.records.format`: the record files' schemas and ``parse_record``;
- :mod:`~workstation.records.parse`: ``load_records``, the records of a commit's tree
  (malformed files skipped as ``Problem`` s, unknown keys kept as warnings), judged
  against the ``queue.toml`` and queue rubrics of that same tree;
- :mod:`~workstation.records.crosscheck`: the rules between records and against their
  rubrics that one file cannot state;
- :mod:`~workstation.records.state`: ``RecordSet``, the state derived from the records
  (current verdict, tie-break, effective values, reservations, queue flags);
- :mod:`~workstation.records.store`: the git writes (``commit_verdict``,
  ``commit_dispute``, ``commit_resolution``, ``reserve``, ``release``), each one file
  committed by :mod:`~workstation.records.commit`;
- :mod:`~workstation.records.drafts`: unsent verdicts, outside the work tree;
- :mod:`~workstation.records.sync`: ``kws sync`` (fetch, integrate, push), its integration
  of local commits and extra refs in :mod:`~workstation.records.integrate`;
- :mod:`~workstation.records.history`: a task's records and the versions they judged;
- :mod:`~workstation.records.calibration`: reviewers against gold verdicts and each other;
- :mod:`~workstation.records.recheck`: the checks re-run on the version a verdict judged;
- :mod:`~workstation.records.report`: the Markdown report of a verdict.

May import: :mod:`workstation.schema`, :mod:`workstation.repo`, :mod:`workstation.task`,
:mod:`workstation.rubric`, :mod:`workstation.analysis`, and of :mod:`workstation.engine`
only the registry and the run in ``recheck`` (to re-run the checks) and the report's
encoding of non-finite floats and its list of checks that could not look in ``store``
(:func:`workstation.engine.report.finite_json`: a record writes them as the report does;
:func:`workstation.engine.report.not_judged_of`). Never :mod:`workstation.tui`,
:mod:`workstation.review`, :mod:`workstation.runner`, :mod:`workstation.harness` or
:mod:`workstation.checks`. Inside the package the order is model, state, format and
crosscheck, parse, commit, store (and integrate below sync); nothing imports upwards.
Import-linter contracts (pyproject.toml) hold each sentence (its layers contract names
model, state, parse and store).
"""
