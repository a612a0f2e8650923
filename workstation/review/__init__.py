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
:mod:`workstation.rubric`, :mod:`workstation.schema`, the stored pre-screens of
:mod:`workstation.screen` (``store``, ``summary``), and of the engine only
:mod:`workstation.engine.events`, :mod:`workstation.engine.report` and
:func:`workstation.engine.context.case_label`. Never :mod:`workstation.tui`, the runner,
the harness or the checks; never torch or triton.
"""
