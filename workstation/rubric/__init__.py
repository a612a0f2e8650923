"""Rubrics: the fields a verdict fills (:mod:`.model`, rubric files read through the schema
layer, ``informed_by`` validated against the check registry), and kws's suggestion for
each field from the findings of the checks it names (:mod:`.suggest`).

May import engine (the registry only), task (queue.toml), settings (the rubric path), schema; never records, review, tui.
"""
