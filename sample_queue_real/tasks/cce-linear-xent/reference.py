import torch


def linear_xent(e, c, targets):
    """Per-token cross-entropy of the logits e @ c^T against targets, in fp32 (or wider)."""
    acc = torch.promote_types(e.dtype, torch.float32)
    logits = e.to(acc) @ c.to(acc).T
    return torch.nn.functional.cross_entropy(logits, targets, reduction="none").to(e.dtype)
