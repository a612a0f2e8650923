"""Rubric files and suggestions (:mod:`.model`): the fields a verdict fills, read through the
schema layer, and kws's suggestion for each field from the findings of the checks its
``informed_by`` names (validated against the check registry).

May import engine (the registry only), task (queue.toml), schema; never records, review, tui.
"""
