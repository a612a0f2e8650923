"""Call monitors: context managers around a step's call of the role, each reporting into
the field of its name of ``extra.monitors``
(:class:`~workstation.protocol.extras.monitors.MonitorReports`; tag ``name``): ``aten_ops``,
``triton_launches``, ``triton_launch_records``, ``num_callers``, ``keep_float64``,
``poison_masked_loads``, ``poison_stores``, ``contract_round``, ``pallas_calls``, ``pallas_strict``. Each is a
frozen :class:`msgspec.Struct` that rejects unknown fields; its handler is registered in a
harness module with ``@monitor(TheMonitor)``. Part of the job
(:mod:`workstation.protocol.steps`, which re-exports every name here).

Torch-free: the parent imports it.
"""

from __future__ import annotations

from typing import Literal

import msgspec


class _Monitor(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, tag_field="name"):
    """Base of the call monitors; each reports into the field of its name of
    ``extra.monitors`` (:mod:`workstation.protocol.extras.monitors`)."""


class AtenOps(_Monitor, tag="aten_ops", frozen=True, kw_only=True):
    """Count the aten ops the call dispatches (:mod:`workstation.harness.trace`)."""


class TritonLaunches(_Monitor, tag="triton_launches", frozen=True, kw_only=True):
    """Count the call's Triton launches per kernel (:mod:`workstation.harness.trace`)."""


class TritonLaunchRecords(_Monitor, tag="triton_launch_records", frozen=True, kw_only=True):
    """Record each distinct Triton launch's signature, constexprs and options for an AOT
    compile (:mod:`workstation.harness.aot_capture`)."""


class KeepFloat64(_Monitor, tag="keep_float64", frozen=True, kw_only=True):
    """While the role runs (on float64 inputs: the oracle), every aten op asked for a
    narrower float dtype (``x.float()``, ``.to(torch.float16)``, a float32 factory) gets
    float64 instead, so a reference that casts internally still computes an oracle.
    Reports ``kept`` (op -> n) and ``total``."""


class ContractRound(_Monitor, tag="contract_round", frozen=True, kw_only=True):
    """The accuracy-contract oracle (``[contract] compute_dtype``, a kws extension): while the
    role runs on float64 inputs, every aten op asked for a narrower float dtype gets float64
    (as :class:`KeepFloat64`) and every floating result is rounded to ``compute`` and
    back (Higham's model of one rounding per operation, fl(x op y) = (x op y)(1 + d),
    |d| <= u). With ``accumulate = compute`` the sums and matmuls the harness knows
    (``sum``, ``mean``, ``mm``, ``bmm``, ``addmm``, ``dot``, ``mv``) also round every partial
    sum to ``compute``; with ``"float32"`` only their result is rounded. Reports
    ``rounded``, ``accumulated`` and ``kept`` (op -> n)."""

    compute: Literal["float16", "bfloat16", "float32", "float64"]
    accumulate: Literal["float16", "bfloat16", "float32"] = "float32"


class PoisonMaskedLoads(_Monitor, tag="poison_masked_loads", frozen=True, kw_only=True):
    """While the role runs under the Triton interpreter, masked lanes of ``tl.load``
    without ``other=`` read NaN (floats) or the 0x5A sentinel (ints), as undefined lanes
    may on a GPU. Reports ``active`` and ``poisoned_lanes``."""


class PoisonStores(_Monitor, tag="poison_stores", frozen=True, kw_only=True):
    """While the role runs under the Triton interpreter, every ``tl.store`` and atomic of its
    kernels writes poison (NaN payloads, 0x5A bytes) into memory instead of its value, while
    the kernels read their own stores back unpoisoned (a shadow of what they stored): only
    code outside the kernels sees poison where they wrote
    (:mod:`workstation.harness.interp_ops`). With ``repeat`` > 1, ``from_call`` is the first
    call (1-based) whose stores are poisoned: the earlier ones run plainly (a result kept from
    them and returned again holds plain values). Reports ``active``, ``stores``, ``elements``,
    ``atomics``, ``exempt`` and ``restored``."""

    from_call: int = 1


class NumCallers(_Monitor, tag="num_callers", frozen=True, kw_only=True):
    """Count Python calls into functions defined in the task file ``file`` (path relative
    to the task folder) while the call runs (:mod:`workstation.harness.numerics`)."""

    file: str


class PallasCalls(_Monitor, tag="pallas_calls", frozen=True, kw_only=True):
    """Count the call's ``pallas_call`` kernel invocations per kernel name, and how they ran
    (interpret mode or native) (:mod:`workstation.harness.pallas`)."""


class PallasStrict(_Monitor, tag="pallas_strict", frozen=True, kw_only=True):
    """Run every ``pallas_call`` of the call in Pallas's TPU interpret mode with strict
    settings: out-of-bounds reads raise, uninitialised memory is NaN, races are detected
    between ``cores`` simulated cores, every grid dimension ``parallel`` unless the kernel
    states its own dimension semantics (:mod:`workstation.harness.pallas`)."""

    cores: int = 2


Monitor = (AtenOps | TritonLaunches | TritonLaunchRecords | NumCallers | PallasCalls | PallasStrict | KeepFloat64
           | PoisonMaskedLoads | PoisonStores | ContractRound)


