"""Payload of the float64 oracle step (:mod:`workstation.harness.numerics`): ``num_oracle``.

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

from workstation.protocol.extras import extra_type
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.results import Payload


class OracleInput(Payload):
    """One input as the oracle's reference call received it (after the float64 upcast):
    ``index``, ``dtype`` (torch dtype name; None for a non-tensor argument)."""

    index: int
    dtype: str | None


class Bump(Payload):
    """The ``bump`` probe: element ``flat_index`` (row-major, of the contiguous copy) of
    input ``input`` moved by a relative ``rel`` (dimensionless; 2^-20)."""

    input: int
    flat_index: int
    rel: float


@extra_type
class NumOracleExtra(CallExtra, tag="num_oracle"):
    """A ``num_oracle`` step: the reference on float64 copies of the case's inputs (the
    oracle: a ``call`` of the reference, whose fields it has) and the error-budget probes
    (arrays ``scale<i>_<j>``, ``abs<j>``, ``bump_<j>``).

    Attributes:
        inputs: the case's own inputs (before the upcast), as a ``call`` step describes
            them.
        monitors: none are run (always empty).
        calls, device_name: as a ``call`` step's (the oracle's one call).
        oracle_inputs: each input as the oracle received it.
        float_inputs: indices of the floating tensor inputs the probes change (the step's
            ``skip`` left out).
        input_representable: floating input index (as a string) -> narrower format
            (``"float32"``, ``"float16"``, ``"bfloat16"``) -> the fraction (0..1) of its
            finite non-zero values that format holds exactly.
        bump: the ``bump`` probe's perturbation (None when it did not run).
        probe_errors: probe name (``"scale0"``, ``"abs"``, ``"bump"``) -> what the reference
            raised on it (``"Type: message"``, at most 300 characters of the message).
    """

    oracle_inputs: list[OracleInput] = []
    float_inputs: list[int] = []
    input_representable: dict[str, dict[str, float]] = {}
    bump: Bump | None = None
    probe_errors: dict[str, str] = {}
