"""kws, the kernel review workstation.

One package per concern, layered top to bottom (docs/architecture.md; the layering is
enforced by tests/test_layers.py):

- :mod:`workstation.cli`       the ``kws`` command
- :mod:`workstation.tui`       the Textual review app (displays and dispatches only)
- :mod:`workstation.review`    the review session and what the app shows and calls
- :mod:`workstation.records`   verdicts, disputes, resolutions, reservations in git
- :mod:`workstation.rubric`    rubric files and suggestions from findings
- :mod:`workstation.checks`    the check battery, one module per check id
- :mod:`workstation.engine`    the check registry, context, scheduler and report
- :mod:`workstation.analysis`  closeness, error budgets, timing statistics, roofline
- :mod:`workstation.runner`    isolated child processes that run untrusted task code
- :mod:`workstation.task`      the task format, queues, a task's sources read statically
- :mod:`workstation.repo`      the queue as a git repository
- :mod:`workstation.protocol`  what parent and child share (typed steps, result files)
- :mod:`workstation.schema`    the one schema layer for every file kws reads
- :mod:`workstation.harness`   the child side (runs task code; imports only protocol)
"""

__version__ = "0.1.0"
