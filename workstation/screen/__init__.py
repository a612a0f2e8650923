"""Screening a whole queue: the check battery on every task version that has no result yet,
on a local pool or a Ray cluster, with the results stored in the queue's git repository.

Owns: what a result is keyed by and the environment of a node (:mod:`~workstation.screen.keys`),
the results as git notes on the task's tree and their exchange with a remote
(:mod:`~workstation.screen.store`), the per-run process-tree supervisor
(:mod:`~workstation.screen.supervise`, run as ``python -m``), one ``kws check`` run on a worker
(:mod:`~workstation.screen.worker`), the plan of a screen and its run, streaming and storing
results (:mod:`~workstation.screen.run`), the local pool (:mod:`~workstation.screen.local`),
the Ray backend (:mod:`~workstation.screen.raycluster`; Ray is the optional extra
``kws[ray]``, imported only there) and the queue's summary table
(:mod:`~workstation.screen.summary`).

Every task runs as its own ``kws check --json`` child process, so kws's own isolation and
limits apply on every node; this package never runs task code itself and never imports
torch or triton. May import: the standard library, third-party libraries (gitpython,
msgspec, psutil; ray only in ``raycluster``), and of kws :mod:`workstation.engine` (the check
registry and its selection), :mod:`workstation.runner` (the device probe), :mod:`workstation.task`,
:mod:`workstation.repo`, :mod:`workstation.schema`, :mod:`workstation.protocol`. Never
records, review, rubric, the checks, analysis, profiles, the TUI or the harness
(import-linter contracts). docs/screen.md describes the whole.
"""
