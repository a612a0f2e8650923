"""The built-in check battery: one module per check id, shared pieces in ``support/``.

Each module defines one :class:`~workstation.engine.check.Check` subclass (its id, report
``order``, phase, docstring) and registers it with
:func:`~workstation.engine.check.register`; :func:`~workstation.engine.check.load_checks`
imports every module here (and every ``kws.checks`` entry point). Adding a check is one new
module here, whose class docstring carries the sections docs/checks.md is generated from
(``python scripts/gen_checks_doc.py``, which also writes ``manifest.json`` here: the ids the
review app validates rubrics against without importing the checks), or a module of another
package named by a ``kws.checks`` entry point.

May import: engine (check, context, report), analysis, profiles, task, settings, protocol, schema.
Never tui, review, records, rubric, screen, the repository, the runner (a check runs steps
and reads the task folder's state through :class:`~workstation.engine.context.CheckContext`)
or the harness (it runs in children; checks name its steps through
:mod:`workstation.protocol`). Import-linter contracts in pyproject.toml hold each of these.
"""
