"""The task format (version 1, ``shared/spec/task-format.md``): the task model
(:mod:`.model`), task.toml's schema and loader (:mod:`.format`), queues and the one
queue.toml reader (:mod:`.queue`), and a task's Python sources read statically
(:mod:`.sources`: the one import walker). Task code is never imported or run here.

Of kws, may import schema, repo and, of protocol, only the parent's one lock around
CPython's parser (:data:`workstation.protocol.parsing.AST_LOCK`, which ``sources`` shares
with protocol's ``.npz`` reader; protocol is the bottom layer, so the lock lives there). An
import-linter contract holds this.
"""
