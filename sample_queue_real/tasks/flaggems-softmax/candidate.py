from flag_gems.ops.softmax import softmax as _softmax


def softmax(x):
    return _softmax(x, -1)
