"""What signed records cost when a queue is read (prints figures; not a timed test).

Builds a queue whose records must be signed (``.kws/allowed_signers``, a fresh ed25519
key), commits ``--verdicts`` signed verdicts through the public API, then times
``load_records`` three ways: **cold** (no kept signature checks: git runs ``ssh-keygen``
for every signed commit), **warm** (the checks kept in the state folder,
``workstation.records.signing._signatures``), and with ``[records] signatures = "off"``
(no checks at all). Everything runs in a temporary folder with its own HOME, git
configuration and KWS_* folders.

Usage: ``.venv/bin/python benchmarks/signed_records.py [--verdicts 100]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verdicts", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kws-signed-"))
    try:
        os.environ.update(HOME=str(tmp), GIT_CONFIG_GLOBAL=str(tmp / ".gitconfig"), GIT_CONFIG_NOSYSTEM="1",
                          KWS_STATE_DIR=str(tmp / "state"), KWS_DATA_DIR=str(tmp / "data"))
        (tmp / ".gitconfig").write_text("")
        import workstation.records.signing as signing
        from tests.recordkit import ALICE, make_queue, verdict
        from tests.test_signing import keygen, line, require_signatures, use_key
        from workstation.records.parse import load_records

        repo = make_queue(tmp / "q")
        key = keygen(tmp, "alice")
        use_key(repo, key)
        require_signatures(repo, line(ALICE, key))
        for _ in range(args.verdicts):
            verdict(repo, "alpha", ALICE)

        def timed() -> tuple[float, object]:
            signing._POLICIES.clear()
            t = time.perf_counter()
            rs = load_records(repo)
            return time.perf_counter() - t, rs

        shutil.rmtree(tmp / "state" / "signatures", ignore_errors=True)
        cold, rs = timed()
        warm, _ = timed()
        (Path(repo.working_tree_dir) / "queue.toml").write_text('name = "q"\n\n[records]\nsignatures = "off"\n')
        repo.git.commit("-q", "-S", "-am", "signatures off")
        off, _ = timed()
        print(f"{args.verdicts} signed verdicts: load_records cold {cold:.2f} s, warm (kept checks) {warm:.2f} s, "
              f"signatures off {off:.2f} s; counted {len(rs.verdicts)}, unverified {len(rs.unverified)}; "
              f"load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
