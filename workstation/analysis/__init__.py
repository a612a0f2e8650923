"""Numerics on data, in the parent: closeness and ULP distance (:mod:`.compare`), error
budgets and suggested tolerances after Higham (:mod:`.numerics`), timing statistics
(:mod:`.timingstats`), roofline bounds (:mod:`.roofline`).

Pure functions of numpy arrays and numbers: may import numpy, scipy (deferred) and the
standard library only; nothing else of kws.
"""
