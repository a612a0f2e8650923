"""Row sums in a random split order (atomics emulated)."""

import os

import torch


def rowsum(x: torch.Tensor) -> torch.Tensor:
    """Row sums: 8 column chunks, accumulated in the order the 'atomics' land."""
    chunks = list(torch.chunk(x, 8, dim=1))
    order = sorted(range(len(chunks)), key=lambda i: os.urandom(1))
    acc = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    for i in order:
        acc = acc + chunks[i].sum(-1)
    return acc
