"""Reference LayerNorm, the textbook two-pass algorithm, vectorised over rows."""

import torch


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last dimension of ``x`` (M, N) with gain ``w`` and bias ``b`` (N,).

    Pass 1 sums the columns into the row mean, pass 2 sums the squared deviations into the
    biased variance, one column at a time, exactly as the definition in spec.md reads.
    Returns an (M, N) tensor of ``x.dtype``.
    """
    n_rows, n_cols = x.shape
    total = torch.zeros(n_rows, dtype=x.dtype, device=x.device)
    for j in range(n_cols):
        total += x[:, j]
    mean = total / n_cols
    sq_dev = torch.zeros(n_rows, dtype=x.dtype, device=x.device)
    for j in range(n_cols):
        d = x[:, j] - mean
        sq_dev += d * d
    var = sq_dev / n_cols
    rstd = torch.rsqrt(var + eps)
    return (x - mean[:, None]) * rstd[:, None] * w + b
