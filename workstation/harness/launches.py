"""The one wrapper around Triton's kernel launch: every harness module that watches or
fails launches observes them through it.

Triton launches a ``@triton.jit`` kernel through ``run`` of its launch class:
``JITFunction.run`` when compiled, ``InterpretedFunction.run`` under ``TRITON_INTERPRET=1``
(``kernel[grid](...)``, autotuned and ``@triton.heuristics`` kernels all end in one of
these). Launches through a ``CompiledKernel`` made with ``triton.compile`` directly are not
seen.

:func:`observing` adds a :class:`LaunchObserver` for the duration of a ``with`` block. The
first active observer patches ``run`` of every launch class; the last one to leave
restores the original methods (also when the block raises). Observers nest: several may
be active at once (a monitor of a call step, an autotune counter, fault injection) and each
sees every launch, in the order they were entered:

1. ``before(launch)`` of each observer, first entered first; one that raises stops the
   launch (fault injection): the observers entered before it get ``after`` with that
   exception, the later ones see nothing; one that returns :data:`SKIP` lets the launch be
   seen but not run (``triton_bounds`` records launches without running kernels);
2. the original ``run`` (unless skipped: then the result is None);
3. ``after(launch, result, error)`` of each observer whose ``before`` returned, last
   entered first, with ``run``'s return value (a ``CompiledKernel`` on a GPU, ``None``
   under the interpreter) or the exception it raised (which then propagates).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any, TypeVar

_observers: list[LaunchObserver] = []
#: returned by an observer's ``before`` to record a launch without running it (the kernel
#: does not run, ``run`` returns None; the other observers still see ``before``/``after``).
SKIP = object()
_patched: list[tuple[type, Any]] = []


class Launch:
    """One launch as observers see it.

    Attributes:
        kernel: the launch-class instance (a ``JITFunction`` or ``InterpretedFunction``).
        args: the positional arguments of ``run`` (the kernel's arguments, in order).
        kwargs: its keyword arguments: kernel arguments passed by name, ``grid``,
            ``warmup`` and launch options (``num_warps``, ``num_stages``, ...).
    """

    __slots__ = ("kernel", "args", "kwargs")

    def __init__(self, kernel: Any, args: tuple, kwargs: dict[str, Any]):
        self.kernel = kernel
        self.args = args
        self.kwargs = kwargs

    @property
    def fn(self) -> Any:
        """The Python function under the jit wrapper (``None`` if the kernel has none)."""
        return getattr(self.kernel, "fn", None)

    @property
    def arg_names(self) -> list[str]:
        """The kernel's parameter names, in order."""
        return list(getattr(self.kernel, "arg_names", []))

    @property
    def name(self) -> str:
        """The kernel function's qualified name."""
        fn = self.fn
        return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(self.kernel)[:80]

    @property
    def warmup(self) -> bool:
        """True for ``kernel.warmup(...)``: compile only, nothing runs."""
        return bool(self.kwargs.get("warmup", False))


class LaunchObserver:
    """Base of launch observers; override either hook (module doc for the order)."""

    def before(self, launch: Launch) -> Any:
        """Called before the launch; raising here prevents it, returning :data:`SKIP`
        records it without running the kernel."""

    def after(self, launch: Launch, result: Any, error: BaseException | None) -> None:
        """Called after the launch with its result, or with the exception it raised."""


ObserverT = TypeVar("ObserverT", bound=LaunchObserver)


def launch_classes() -> list[type]:
    """The Triton classes whose ``run`` launches a kernel (those this Triton has)."""
    classes = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
        base = getattr(InterpretedFunction, "_kws_base", None)  # under the fidelity layer
        if base is not None:
            classes.append(base)
    except ImportError:
        pass
    return classes


@contextlib.contextmanager
def observing(observer: ObserverT) -> Iterator[ObserverT]:
    """Let ``observer`` see every Triton launch inside the block (module doc)."""
    if not _observers:
        _patch()
    _observers.append(observer)
    try:
        yield observer
    finally:
        _observers[:] = [o for o in _observers if o is not observer]
        if not _observers:
            _unpatch()


def _patch() -> None:
    for cls in launch_classes():
        orig = cls.__dict__.get("run")
        if orig is not None:
            _patched.append((cls, orig))
            setattr(cls, "run", _observed(orig))  # noqa: B010  (a launch class found at run time)


def _unpatch() -> None:
    while _patched:
        cls, orig = _patched.pop()
        setattr(cls, "run", orig)  # noqa: B010  (a launch class found at run time)


def _observed(orig: Any) -> Any:
    @functools.wraps(orig)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        launch = Launch(self, args, kwargs)
        entered: list[LaunchObserver] = []
        skip = False
        try:
            for ob in list(_observers):
                skip = ob.before(launch) is SKIP or skip
                entered.append(ob)
            result = None if skip else orig(self, *args, **kwargs)
        except BaseException as e:
            for ob in reversed(entered):
                ob.after(launch, None, e)
            raise
        for ob in reversed(entered):
            ob.after(launch, result, None)
        return result

    return run
