"""Each step kind's own payload (a step result's ``extra``), one typed Struct per kind.

Every class here subclasses :class:`Extra`, is tagged with its step's kind
(``tag="call"`` for :class:`~workstation.protocol.steps.CallStep`) and is registered in
:data:`EXTRAS` by :func:`extra_type`; the harness builds them, the parent decodes them once
(:func:`decode_extra`, called by :func:`workstation.protocol.wire.read_step`) and checks
read attributes, never dict keys. A step whose handler failed early still sends its kind's
Struct, so every field has a default: a check reads a step's ``extra`` only after it asked
``ok``. The modules of this package group the kinds by the harness module that writes them.

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from workstation.protocol.results import Payload, ResultFormatError


class Extra(Payload, tag_field="kind"):
    """Base of a step kind's payload; the tag is the step's kind (``kind_of(step)``)."""


#: step kind -> its payload Struct.
EXTRAS: dict[str, type[Extra]] = {}

E = TypeVar("E", bound=Extra)


def extra_type(cls: type[E]) -> type[E]:
    """Class decorator: register ``cls`` as the payload of the step kind its tag names.

    Raises:
        ValueError: ``cls`` has no tag, or another class holds its kind.
    """
    tag = cls.__struct_config__.tag
    if not isinstance(tag, str) or not tag:
        raise ValueError(f"{cls.__qualname__}: an Extra needs tag=<step kind>")
    old = EXTRAS.get(tag)
    if old is not None and old is not cls:
        raise ValueError(f"step kind {tag!r} already has its payload {old.__qualname__}")
    EXTRAS[tag] = cls
    return cls


def decode_extra(kind: str, data: dict[str, Any]) -> Extra:
    """Step kind ``kind``'s payload from the JSON object the harness wrote.

    Raises:
        ResultFormatError: ``kind`` is no step kind of kws's, or the object is not its
            Struct (a field missing, unknown or of another type; another kind's tag).
    """
    cls = EXTRAS.get(kind)
    if cls is None:
        raise ResultFormatError(f"a step result of kind {kind!r}: no step kind of kws's has that name")
    try:
        return msgspec.convert(data, type=cls)
    except msgspec.ValidationError as e:
        raise ResultFormatError(f"the {kind} step's extra does not have kws's form: {e}") from None


def extra_as(extra: Extra | dict[str, Any] | None, cls: type[E]) -> E:  # a dict or None: a kws bug
    """``extra`` (a step result's decoded payload) as the payload Struct ``cls`` its reader
    expects.

    Raises:
        TypeError: ``extra`` is another kind's payload (or an untyped dict, or None): a kws
            bug, the reader asked a step of another kind.
    """
    if not isinstance(extra, cls):
        if extra is None:
            raise TypeError(f"expected the {cls.__struct_config__.tag} step's payload, got none")
        if isinstance(extra, dict):
            raise TypeError(f"expected the {cls.__struct_config__.tag} step's payload, got an untyped dict "
                            f"(kind {extra.get('kind', '?')!r})")
        raise TypeError(f"expected the {cls.__struct_config__.tag} step's payload, got the "
                        f"{type(extra).__struct_config__.tag} step's ({type(extra).__qualname__})")
    return extra


# the payload modules register their kinds in EXTRAS at import (one line per module)
from workstation.protocol.extras import (  # noqa: E402  (they import Extra and extra_type from above)
    audit,  # noqa: F401
    autotune,  # noqa: F401
    backends,  # noqa: F401
    calls,  # noqa: F401
    guards,  # noqa: F401
    monitors,  # noqa: F401
    numerics,  # noqa: F401
    probes,  # noqa: F401
    series,  # noqa: F401
    state,  # noqa: F401
    timing,  # noqa: F401
    triton,  # noqa: F401
)
