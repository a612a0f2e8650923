"""The parent/child protocol: what a job child is asked to do and what it sends back.

Owns the wire format and the specs shared by the parent (checks, engine, runner) and the
child (the harness): :mod:`~workstation.protocol.steps` (the typed job, steps, transforms
and monitors, validated in the parent before a child starts), :mod:`~workstation.protocol.wire`
(result files and how the parent reads them safely), :mod:`~workstation.protocol.sentinels`
(poison and guard-band bit patterns) and :mod:`~workstation.protocol.layouts` (the layout
kinds of ``noncontiguous``).

Torch-free, so both sides import it. Its modules may import msgspec, numpy and the
standard library, and each other; nothing else of kws.
"""
