"""SiLU that leaves a worker thread running."""

import threading
import time

import torch

_worker = None


def _prefetch() -> None:
    while True:
        time.sleep(0.05)


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return SiLU(x); starts the prefetch worker on first use."""
    global _worker
    if _worker is None:
        _worker = threading.Thread(target=_prefetch, daemon=True, name="silu-prefetch")
        _worker.start()
    return x * torch.sigmoid(x)
