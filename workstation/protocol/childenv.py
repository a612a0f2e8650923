"""The environment variables through which the parent hands resolved settings to the fork
server and its job children.

The child side (``workstation.harness``) may import nothing of kws but the protocol, so it
cannot read kws's settings (``workstation.settings``); the runner
(``runner.server.child_env``) resolves them in the parent and sets these variables in the
scrubbed environment of the fork server, which every job child inherits. Only these
variables are read by the harness; a reviewer's own ``KWS_*`` variable never reaches a child
except through them (the environment is an allow-list).

- :data:`DEVICE`: ``"cpu"`` or ``"cuda"`` when the parent forces one (the ``device``
  setting, ``kws check --device``); unset: CUDA when available.
- :data:`INPUT_BUDGET`: the most bytes one case's inputs may take (an integer, the
  ``input_budget`` setting); unset: the child's own estimate from free memory.
- :data:`STRETCH`: the ``test_stretch`` setting (a factor > 1: every step and import sleeps
  that many times its own wall time, minus one; a test hook simulating a loaded machine);
  unset: none.
- :data:`CUDA_EMULATION`: the ``cuda_emulation`` setting (``"1"`` / ``"0"``): whether a CUDA
  extension is compiled as host code and run on the CPU when there is no GPU
  (:mod:`workstation.harness.cuda_emu`); unset: on.

Values the child needs per step travel in the job's steps instead (the timing step's
``cache_bytes`` and ``compile_timeout_s``: the ``llc_bytes`` and ``compile_timeout``
settings).
"""

from __future__ import annotations

DEVICE = "KWS_DEVICE"
INPUT_BUDGET = "KWS_INPUT_BUDGET"
STRETCH = "KWS_TEST_STRETCH"
CUDA_EMULATION = "KWS_CUDA_EMULATION"
#: every variable of this channel.
CHANNEL = (DEVICE, INPUT_BUDGET, STRETCH, CUDA_EMULATION)
