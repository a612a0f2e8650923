from flag_gems.ops.layernorm import layer_norm


def layernorm(x, w, b):
    return layer_norm(x, [x.shape[-1]], w, b, 1e-5)[0]
