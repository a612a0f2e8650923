"""Review: what the review app displays and the work behind it, without Textual.

Owns: the review session and its undo/redo (:mod:`~workstation.review.session`), check
sources (:mod:`~workstation.review.sources`), draft autosave
(:mod:`~workstation.review.autosave`), a finding's evidence as text
(:mod:`~workstation.review.evidence`), the timing view (:mod:`~workstation.review.timing`),
a task's spec and diffs (:mod:`~workstation.review.taskview`, :mod:`~workstation.review.diff`),
the queue index, filter and sort (:mod:`~workstation.review.queueview`), and the services
the TUI calls for every git, record and file operation (:mod:`~workstation.review.services`).

May import: the standard library and third-party libraries (no Textual), and of kws
:mod:`workstation.records`, :mod:`workstation.repo`, :mod:`workstation.task`,
:mod:`workstation.rubric`, :mod:`workstation.settings`, :mod:`workstation.schema`, :mod:`workstation.protocol` (the
JSON-lines reader of the check server's stream), the stored pre-screens of
:mod:`workstation.screen` (``summary``), of the engine only
:func:`workstation.engine.context.case_label` (``evidence``), and of the runner only the
sandbox setting (:func:`workstation.runner.policy.sandbox_mode`, read by ``sources`` for
the marker every screen shows: the check server starts the runner with the same setting).
Never :mod:`workstation.tui`, the rest of the runner and the engine, the harness, the
checks, analysis or profiles; never torch or triton. Import-linter contracts
(pyproject.toml) hold each of these.
"""
