"""Pieces several checks share (never a check themselves):

- trials on derived inputs (:mod:`.trials`), legal parameter values (:mod:`.legal`), ragged
  variants of declared cases (:mod:`.ragged`), the cost model of derived cases
  (:mod:`.costmodel`) and the generic shrinker (:mod:`.shrink`);
- the numerics audit (:mod:`.numaudit`), the tolerance-versus-budget rule of the checks that
  compare on derived inputs (:mod:`.budgetrule`), the oracle of a declared accuracy contract
  (:mod:`.contract`) and kws's own timing measurement (:mod:`.timing`);
- static scans of task sources (:mod:`.static`, :mod:`.benchsource`) and the guarded-run
  helpers (:mod:`.guarded`);
- the battery's candidate calls replayed on the baseline or a translation's source
  (:mod:`.replay`);
- kws's own profile of a task (:mod:`.profiling`);
- backend readings without running: compiled CUDA's ptxas report, PTX and SASS
  (:mod:`.cuda_read`), PTX as a program (barriers, guards: :mod:`.ptx_flow`), the host
  launch arithmetic of CUDA sources (:mod:`.cuda_launch`), NKI kernels from their Python
  source (:mod:`.nki_read`);
- the invariant audit content-follow, observer-effect and after-return share (:mod:`.audit`);
- the poisoned-store run that tells which output elements the candidate's kernels produced
  (:mod:`.kernelwork`: kernel-work, and fallback and profile confirming their suspicions) and
  the legal case that reaches a line of the candidate, read from its branch conditions
  (:mod:`.reach`: fallback);
- the serial call series late-write, call-count and thread-census share (:mod:`.series`)
  and the ``[inputs] keep_structure`` indices checked against the inputs (:mod:`.keep`);
- the structure the task's own inputs always show (sorted, non-negative, symmetric, rows
  summing to one, integer-valued), kept by every value transform (:mod:`.structure`);
- a hack-class signal a check saw and could not confirm: not judged, its finding tagged
  (:mod:`.suspicion`; the kinds and the report's nets in ``workstation.engine.suspicion``);
- proofs over the legal shape space: a Triton kernel's TTIR address arithmetic as Z3 terms
  (:mod:`.ttir_z3`) and the fitted launch model with its Z3 questions (:mod:`.boundsmodel`).

tests/test_registry.py checks that this list names every module of the package.
Same imports as the checks (engine, analysis, task, protocol, schema).
"""
