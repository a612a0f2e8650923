"""kws, the kernel review workstation.

Modules, one per concern:

- :mod:`workstation.task.format`     load and validate queues and tasks (task format v1)
- :mod:`workstation.analysis.compare`     closeness, ULP distance and error statistics (numpy, parent side)
- :mod:`workstation.runner`      isolated child processes that run untrusted task code
- :mod:`workstation.checks`      the check battery, one module per check id
- :mod:`workstation.engine.run`      runs a battery of checks on a task and builds the report
- :mod:`workstation.engine.report`      JSON and text rendering of a check report
- :mod:`workstation.analysis.numerics`    error budget, unit roundoffs, suggested tolerances
- :mod:`workstation.analysis.timingstats` timing statistics (median, IQR, bootstrap ratio intervals)
- :mod:`workstation.rubric.model`      rubric files and suggestions from findings
- :mod:`workstation.repo.gitqueue`    the queue as a git repository, first-run copy, identities
- :mod:`workstation.records.store`     verdicts, disputes, resolutions, reservations (with drafts,
  sync, history, recheck, calibration, reportmd)
- :mod:`workstation.review.session`      the review-session model the TUI displays
- :mod:`workstation.review.queueview`   the queue index, filters and sort keys
- :mod:`workstation.review.diff`   unified/split diff rows, hunks, word spans
- :mod:`workstation.engine.server` runs the engine in its own process for the TUI
- :mod:`workstation.tui`         the Textual review app (displays and dispatches only)
- :mod:`workstation.cli.main`         the ``kws`` command
"""

__version__ = "0.1.0"
