"""Reference-side helpers shared by the tasks of this queue (plain PyTorch)."""

import torch


def grads_of(fn, inputs, dy, wrt):
    """Gradients of ``sum(fn(*inputs) * dy)`` with respect to ``inputs[i]`` for i in wrt.

    Each input in ``wrt`` is detached and made a leaf that requires grad; returns a tuple
    of gradients in the order of ``wrt``."""
    xs = list(inputs)
    for i in wrt:
        xs[i] = xs[i].detach().clone().requires_grad_(True)
    y = fn(*xs)
    y.backward(dy)
    return tuple(xs[i].grad for i in wrt)


def hf_rotate_half(x):
    """HuggingFace's rotate_half: (x1, x2) -> (-x2, x1) over the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)
