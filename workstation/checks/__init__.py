"""The built-in check battery: one module per check id, shared pieces in ``support/``.

Each module defines one :class:`~workstation.engine.check.Check` subclass (its id, report
``order``, phase, docstring) and registers it with
:func:`~workstation.engine.check.register`; :func:`~workstation.engine.check.load_checks`
imports every module here (and every ``kws.checks`` entry point). Adding a check is one new
module here (plus its section in docs/checks.md), or a module of another package named by a
``kws.checks`` entry point.

May import: engine (check, context, report), analysis, task, protocol, schema. Never tui,
review, records, runner internals or harness (the harness runs in children; checks name its
steps through :mod:`workstation.protocol`).
"""
