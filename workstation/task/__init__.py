"""The task format (version 1, ``shared/spec/task-format.md``): the task model
(:mod:`.model`), task.toml's schema and loader (:mod:`.format`), queues and the one
queue.toml reader (:mod:`.queue`), and a task's Python sources read statically
(:mod:`.sources`: the one import walker). Task code is never imported or run here.

May import schema, repo and the standard library.
"""
