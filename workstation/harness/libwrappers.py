"""What library code expects of Triton, given to it under the interpreter (part of the
fidelity layer, :mod:`workstation.harness.fidelity`):

- ``@triton.jit`` returns an object that is both the interpreter's function and a
  ``JITFunction`` (:func:`wrap_jit_class`), so code that checks ``isinstance(fn,
  JITFunction)`` or reads its ``params``, ``cache_key``, ``signature``, ``src`` runs;
- library launch wrappers that cache and relaunch compiled kernels themselves are adapted
  right after their module executes (:data:`POST_IMPORT`, run by a ``sys.meta_path``
  finder: :func:`install_post_import`): FlagGems' ``LibEntry`` and ``LibTuner``.
  :data:`ADAPTED` names what was adapted in this process.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from typing import Any


def wrap_jit_class() -> None:
    """Make ``@triton.jit`` under the interpreter return an object that is both the
    interpreter's function and a ``JITFunction`` (its ``params``, ``cache_key``,
    ``signature``, ``src``), so library code that checks ``isinstance(fn, JITFunction)`` or
    reads those attributes (FlagGems' ``pointwise_dynamic``, ``LibTuner``; Triton's own
    autotuner listener) runs unchanged. Launching and device calls stay the interpreter's."""
    from triton.runtime import interpreter as I

    base = I.InterpretedFunction
    if getattr(base, "_kws_fidelity", False):
        return
    I.InterpretedFunction = _interpreted_jit_class(base)


def _interpreted_jit_class(base: Any) -> type:
    """The subclass of the interpreter's function class ``base`` and ``JITFunction``
    (:func:`wrap_jit_class`)."""
    from triton.runtime.jit import JITFunction

    # the interpreter's own run, captured before any launch observer patches the class
    # (launches.py patches both classes; calling the patched base run from the subclass's
    # run would show every launch twice)
    base_run = base.__dict__["run"]

    class InterpretedJITFunction(base, JITFunction):
        _kws_fidelity = True
        _kws_base = base

        def __init__(self, fn: Any, **kwargs: Any) -> None:
            _jit_fields(self, JITFunction, fn, kwargs)
            base.__init__(self, fn, **kwargs)

        @property
        def __name__(self) -> str:
            return self.fn.__name__

        @__name__.setter
        def __name__(self, value: str) -> None:
            pass

        def run(self, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
            return base_run(self, *args, grid=grid, warmup=warmup, **kwargs)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return base.__call__(self, *args, **kwargs)

        def __getitem__(self, grid: Any) -> Any:
            return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

        @property
        def cache_key(self) -> str:
            """Triton's hash of the source and its dependencies; where the walk meets an
            interpreter object made before this layer (Triton's own ``tl.standard``
            functions), the hash of this function's source alone."""
            return _jit_cache_key(self, JITFunction)

        def __repr__(self) -> str:
            return f"InterpretedJITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    InterpretedJITFunction.__qualname__ = "InterpretedJITFunction"
    return InterpretedJITFunction


def _jit_fields(obj: Any, jit_cls: Any, fn: Any, kwargs: dict[str, Any]) -> None:
    """``JITFunction``'s own fields on ``obj`` where it can make them (it reads ``fn``'s
    source); without them the interpreter's fields suffice."""
    try:
        jit_cls.__init__(obj, fn, **kwargs)
    except Exception:  # noqa: BLE001  (no source: the interpreter's own fields suffice)
        pass


def _jit_cache_key(obj: Any, jit_cls: Any) -> str:
    """``JITFunction.cache_key`` of ``obj``, or the hash of its function's source alone where
    Triton's dependency walk fails on an interpreter object."""
    try:
        return jit_cls.cache_key.fget(obj)
    except Exception:  # noqa: BLE001  (the walk met an interpreter object: the source's own hash instead)
        return _source_hash(obj.fn)


def _adapt_flaggems_libentry(mod: Any) -> None:
    """FlagGems' ``LibEntry`` (``flag_gems.utils.libentry``) caches the ``CompiledKernel``
    that ``JITFunction.run`` returns and relaunches it itself; it walks ``.fn`` down to a
    ``JITFunction`` at decoration time. Under the interpreter there is neither (the
    interpreter's function runs the kernel and returns None), so each launch goes straight
    to the wrapped function: the same kernel, the same autotuner and heuristics, run by the
    interpreter."""
    cls = getattr(mod, "LibEntry", None)
    if cls is None:
        return

    def __init__(self: Any, fn: Any) -> None:
        self.fn = fn
        self.arg_names = fn.arg_names
        inner = fn
        while hasattr(inner, "fn") and not callable(getattr(inner, "rewrite", None)):
            inner = inner.fn
        self.jit_function = inner
        self.kernel_cache = ({},)

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.fn.run(*args, **kwargs)

    cls.__init__ = __init__
    cls.run = run
    ADAPTED.append("flag_gems.utils.libentry.LibEntry")
    tuner = getattr(mod, "LibTuner", None)
    if tuner is not None:
        import functools

        def cache_key(self: Any) -> str:
            """The innermost function's source hash (``JITFunction.cache_key`` compiled)."""
            inner = self.fn
            while hasattr(inner, "fn") and not hasattr(inner, "cache_key"):
                inner = inner.fn
            if hasattr(inner, "cache_key"):
                return inner.cache_key
            return _source_hash(inner)

        prop = functools.cached_property(cache_key)
        prop.__set_name__(tuner, "cache_key")
        tuner.cache_key = prop
        ADAPTED.append("flag_gems.utils.libentry.LibTuner.cache_key")


def _source_hash(fn: Any) -> str:
    import hashlib
    import inspect

    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        src = getattr(fn, "__qualname__", repr(fn))
    return hashlib.sha256(src.encode()).hexdigest()


#: module name -> adapter run right after the module executes (under the interpreter).
POST_IMPORT: dict[str, Callable[[Any], None]] = {
    "flag_gems.utils.libentry": _adapt_flaggems_libentry,
}
#: the wrappers adapted in this process (reported with the self-test).
ADAPTED: list[str] = []


class _PostImportFinder:
    """A ``sys.meta_path`` finder that runs :data:`POST_IMPORT` adapters after their module
    executes (the module is found and loaded by the other finders, unchanged)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in POST_IMPORT:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        loader = spec.loader
        orig_exec = loader.exec_module
        adapter = POST_IMPORT[name]

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                orig_exec(module)
                adapter(module)

        spec.loader = _Loader()
        return spec


def install_post_import() -> None:
    """Put the :class:`_PostImportFinder` first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())
    for name, adapter in POST_IMPORT.items():
        mod = sys.modules.get(name)
        if mod is not None:
            adapter(mod)

