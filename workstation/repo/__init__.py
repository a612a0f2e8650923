"""The queue as a git repository (:mod:`.gitqueue`): opening it, reviewer identities, task
versions (git tree ids), the per-user data folders and the first-run copy of the sample
queue.

May import gitpython, platformdirs and the standard library; nothing of kws but its version.
"""
