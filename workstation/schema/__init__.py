"""The one schema layer for every file kws reads (task.toml, queue.toml, rubrics, keymaps,
records, attached files): guarded reading, declarative structs, one error type.

- :mod:`workstation.schema.problem`: :class:`~workstation.schema.problem.Problem`, the
  (file, key, problem) error every loader raises or collects;
- :mod:`workstation.schema.toml`: :func:`~workstation.schema.toml.read_toml`, the guarded
  read (size cap, UTF-8 with the offending byte named, nesting depth, ``RecursionError``);
- :mod:`workstation.schema.structs`: :func:`~workstation.schema.structs.convert` (a parsed
  table into a msgspec ``Struct``, with messages naming the dotted key and the value) and
  :func:`~workstation.schema.structs.unknown_keys` (so each file kind decides whether an
  unknown key is an error or a warning).

The bottom layer: imports only the standard library and msgspec.
"""
