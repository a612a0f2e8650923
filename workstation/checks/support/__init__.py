"""Pieces several checks share (never a check themselves): trials on derived inputs
(:mod:`.trials`), legal parameter values (:mod:`.legal`), the cost model of derived cases
(:mod:`.costmodel`), the generic shrinker (:mod:`.shrink`), the numerics audit
(:mod:`.numaudit`), kws's own timing measurement (:mod:`.timing`), static scans of task
sources (:mod:`.static`, :mod:`.benchsource`) and the guarded-run helpers
(:mod:`.guarded`).

Same imports as the checks (engine, analysis, task, protocol, schema).
"""
