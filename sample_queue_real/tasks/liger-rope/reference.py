from refops import hf_rotate_half


def rope(q, k, cos, sin):
    """HuggingFace apply_rotary_pos_emb with unsqueeze_dim=1."""
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * c) + (hf_rotate_half(q) * s), (k * c) + (hf_rotate_half(k) * s)
