"""kws, the kernel review workstation.

Modules, one per concern:

- :mod:`workstation.taskfmt`     load and validate queues and tasks (task format v1)
- :mod:`workstation.compare`     closeness, ULP distance and error statistics (numpy, parent side)
- :mod:`workstation.runner`      isolated child processes that run untrusted task code
- :mod:`workstation.checks`      the check battery, one module per check id
- :mod:`workstation.engine`      runs a battery of checks on a task and builds the report
- :mod:`workstation.report`      JSON and text rendering of a check report
- :mod:`workstation.rubric`      rubric files and suggestions from findings
- :mod:`workstation.records`     verdicts, disputes and resolutions in the git-backed queue
- :mod:`workstation.tui`         the Textual review app (displays and dispatches only)
- :mod:`workstation.cli`         the ``kws`` command
"""

__version__ = "0.1.0"
