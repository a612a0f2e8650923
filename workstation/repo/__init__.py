"""The queue as a git repository.

- :mod:`.gitqueue`: opening it, reviewer identities, task versions (git tree ids), the
  per-user data folders, the first-run copy of the sample queue, and the one way kws runs
  git: :func:`~.gitqueue.run_git` / :func:`~.gitqueue.git_result` (GitPython's
  ``Git.execute`` with :func:`~.gitqueue.harden`'s environment: no hooks, no
  repository-configured programs). ``tests/test_git_one_way.py`` refuses any other;
- :mod:`.plumbing`: commits in a temporary index, journaled compare-and-swap branch moves;
- :mod:`.lock`: kws's own flock and the recovery it runs.

Inside the package gitqueue is the bottom (plumbing imports it, lock imports both, never
the reverse). May import gitpython and the standard library; of kws only its version and
:mod:`workstation.settings` (the per-user folders). Both are import-linter contracts (pyproject.toml).
"""
