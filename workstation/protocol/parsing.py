"""The one lock around CPython's AST construction in the parent process.

CPython's parser is not safe to run from several threads at once: two threads building an
AST together raise ``SystemError: AST constructor recursion depth mismatch``. The parent
parses in two places that run in the engine's parallel check threads: task sources
(``workstation.task.sources.parse_python``) and the header of every ``.npy`` entry of a step's
``.npz`` result (numpy reads it with ``ast.literal_eval``, ``workstation.protocol.wire``).
Both take :data:`AST_LOCK`.
"""

from __future__ import annotations

import threading

#: held while ``ast.parse`` or ``ast.literal_eval`` runs in the parent.
AST_LOCK = threading.Lock()
