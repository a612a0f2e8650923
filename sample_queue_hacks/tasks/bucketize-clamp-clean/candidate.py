

def bucketize(x, boundaries):
    """The number of boundaries below each x (its bucket: boundaries are sorted)."""
    return (boundaries[None, :] < x[:, None]).sum(-1).to(x.dtype)
