"""Custody of step results (issue 26), attack by attack: a step's result passes into kws's
hands at the step boundary, and the parent uses only the bytes kws's fork server recorded.

Attacks: (a) the job hands over future steps on kws's channel before it patches numpy, then
silences the channel; (b) a forked helper rewrites ``step-<i>.npz`` after the harness wrote
it; (c) a helper rewrites the state probe's JSON (TF32 shown off); (d) ``json.dumps.__code__``
swapped. Each asserts refusal (a forged step, never judged) or a fail, never exit 0.
"""

from __future__ import annotations

import re

import pytest

from tests.hostile import make_task, result
from workstation.engine.report import exit_code, to_json_dict
from workstation.engine.run import run_checks
from workstation.protocol.steps import CallStep, StateProbeStep
from workstation.runner import bwrap as bw
from workstation.task.format import load_task

pytestmark = pytest.mark.skipif(not bw.find_bwrap() or bool(bw.probe(bw.find_bwrap() or "bwrap")),
                                reason="bubblewrap is not installed or cannot create namespaces here "
                                       "(.ci/run installs it)")

CASE = {"N": 64, "dtype": "float32"}

#: (a): at import, hand over {count} step(s) while nothing is patched yet, then make numpy
#: "repair" the wrong outputs and point kws's channel at /dev/null.
EARLY_HANDOVER = """
import os
import numpy as np
import workstation.harness as h

w, r = h.CHANNEL
for _ in range({count}):
    os.write(w, b"V " + b"0" * 64 + b" -\\n")
_savez = np.savez

def _repair(file, *args, **arrays):
    if "out0" in arrays:
        arrays["out0"] = arrays["out0"] - 1.0
    return _savez(file, *args, **arrays)

np.savez = _repair
os.dup2(os.open(os.devnull, os.O_WRONLY), w)

def add(x, y):
    return x + y + 1.0
"""


@pytest.mark.parametrize("count", [1, 8])
def test_handing_over_future_steps_never_passes_a_wrong_candidate(tmp_path, runner, count):
    d = make_task(tmp_path, f"early{count}", EARLY_HANDOVER.format(count=count))
    res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0])
    r = result(res, "correctness")
    code = exit_code(to_json_dict(res))
    assert code in (1, 4) and r.status in ("fail", "not_judged", "error"), (code, r)
    text = " ".join(f.summary for f in res.findings) + str([f.evidence for f in res.findings])
    assert "refused" in text and re.search(r"hand(ed)?[- ]over", text), text


def _job(runner, task_dir, steps):
    task = load_task(task_dir)
    return runner.run(task.dir, steps, timeout=120, entry={k: str(v) for k, v in task.entry.items()},
                      principal="candidate", cache_key="custody")


#: (b), (c): on its second call, a forked helper rewrites step 0's {what} (the harness wrote
#: it and handed it over during the first); the helper finishes before the call returns.
REWRITE_LATER = """
import json, os
import numpy as np
import torch

def _flip_tf32(doc):
    if isinstance(doc, dict):
        return {{k: ({{True: False, "True": "False"}}.get(v, v) if "tf32" in k.lower() and v in (True, "True")
                    else _flip_tf32(v)) for k, v in doc.items()}}
    if isinstance(doc, list):
        return [_flip_tf32(v) for v in doc]
    return doc

def _rewrite():
    out = "/kws/job/out/step-0"
    if "{what}" == "npz":
        with np.load(out + ".npz") as z:
            arrays = {{k: z[k] for k in z.files}}
        arrays["out0"] = arrays["out0"] - 1.0
        with open(out + ".npz", "wb") as f:
            np.savez(f, **arrays)
    else:
        doc = json.load(open(out + ".json"))
        with open(out + ".json", "w") as f:
            json.dump(_flip_tf32(doc), f)

def add(x, y):
    with open("/tmp/calls", "a") as f:  # the module may be imported once per step: count in a file
        f.write("x")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    if os.path.getsize("/tmp/calls") == 2:
        pid = os.fork()
        if pid == 0:
            try:
                _rewrite()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    return x + y + 1.0
"""


def test_a_helper_rewriting_a_handed_over_npz_is_refused(tmp_path, runner):
    d = make_task(tmp_path, "rewnpz", REWRITE_LATER.format(what="npz"))
    job = _job(runner, d, [CallStep(role="candidate", case=CASE, seed=0), CallStep(role="candidate", case=CASE, seed=1)])
    assert job.steps[0] is None and 0 in job.forged, job
    assert "rewritten by task code" in job.forged[0], job.forged
    assert job.steps[1] is not None, job.forged  # the step after it is kws's own, untouched


def test_a_helper_rewriting_the_state_probe_json_is_refused(tmp_path, runner):
    d = make_task(tmp_path, "rewjson", REWRITE_LATER.format(what="json"))
    job = _job(runner, d, [StateProbeStep(role="candidate", case=CASE, seed=0),
                           CallStep(role="candidate", case=CASE, seed=0)])
    assert job.steps[0] is None and 0 in job.forged, job
    assert "step-0.json" in job.forged[0] and "rewritten by task code" in job.forged[0], job.forged


#: (d): the job swaps the code of json.dumps (no name in any namespace changes).
SWAP_DUMPS_CODE = """
import json

def _fake_dumps(obj, *args, **kw):
    import json as j
    return j.JSONEncoder(default=kw.get("default")).encode(obj)

def add(x, y):
    json.dumps.__code__ = _fake_dumps.__code__
    return x + y
"""


def test_a_swapped_code_object_is_seen_from_outside(tmp_path, runner):
    if not runner.device.verifier:
        pytest.skip("the out-of-process check is off here: " + "; ".join(runner.device.notes))
    d = make_task(tmp_path, "swapcode", SWAP_DUMPS_CODE)
    job = _job(runner, d, [CallStep(role="candidate", case=CASE, seed=0)])
    assert job.steps[0] is None and 0 in job.forged, job
    assert "json.dumps code replaced" in job.forged[0], job.forged


#: every writable place of a job is a tmpfs of its own with the size the settings give; a
#: write past it fails with ENOSPC (many files, each under the file-size limit).
FILL_EVERY_CAP = """
import errno, os

CAPS = {caps!r}

def _fstype(path):
    best = ("", "")
    for line in open("/proc/self/mountinfo"):
        parts = line.split()
        mp, fstype = parts[4], parts[parts.index("-") + 1]
        if (path == mp or path.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best[0]):
            best = (mp, fstype)
    return best[1]

def _fill(folder, cap):
    chunk = b"x" * (1 << 20)
    names = []
    try:
        for i in range(cap // len(chunk) + 8):
            names.append(os.path.join(folder, f"fill{{i}}"))
            with open(names[-1], "wb") as f:
                f.write(chunk)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        return "ENOSPC"
    finally:
        for n in names:
            if os.path.exists(n):
                os.unlink(n)
    return f"wrote {{len(names)}} MiB"

def add(x, y):
    bad = []
    for folder, cap in CAPS.items():
        st = os.statvfs(folder)
        if st.f_blocks * st.f_frsize != cap or _fstype(folder) != "tmpfs":
            bad.append(f"{{folder}}: {{_fstype(folder)}} of {{st.f_blocks * st.f_frsize}} bytes, not a tmpfs of {{cap}}")
        got = _fill(folder, cap)
        if got != "ENOSPC":
            bad.append(f"{{folder}}: {{got}} past its cap of {{cap}}")
    if bad:
        raise RuntimeError("; ".join(bad))
    return x + y
"""


def test_every_writable_place_of_a_job_is_a_capped_tmpfs(tmp_path, runner, monkeypatch):
    """The settings' caps hold in the job: its folder (results, stdout), /tmp, /dev/shm and
    /var/tmp are tmpfs of their own of those sizes, and writing past each fails with ENOSPC
    inside the job (not on the host's disk) while kws goes on: correctness passes."""
    disk, tmp, shm = 24 << 20, 16 << 20, 8 << 20
    monkeypatch.setenv("KWS_JOB_DISK_BYTES", str(disk))
    monkeypatch.setenv("KWS_JOB_TMP_BYTES", str(tmp))
    monkeypatch.setenv("KWS_JOB_SHM_BYTES", str(shm))
    caps = {"/kws/job/out": disk, "/tmp": tmp, "/dev/shm": shm, "/var/tmp": shm}
    d = make_task(tmp_path, "fill", FILL_EVERY_CAP.format(caps=caps))
    res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0])
    r = result(res, "correctness")
    assert r.status == "pass", [(f.summary, f.evidence) for f in res.findings]
    assert not any((runner._root / "jobs").iterdir())  # nothing of the job left on the host
