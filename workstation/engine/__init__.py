"""The check engine: what a check is and the one registry (:mod:`.check`), what a check may
use while it runs (:mod:`.context`: steps in isolated children, the per-run stash,
comparisons), the scheduler (:mod:`.run`: phases, events), the contract's JSON report
(:mod:`.report`) and the check server the review app talks to (:mod:`.server`).

Checks are plugins: the engine loads them by name (``workstation.checks`` and the
``kws.checks`` entry points) and never imports a check module statically. May import
analysis, runner, task, repo, settings, protocol, schema; never checks, rubric, records, review, tui,
harness.
"""
