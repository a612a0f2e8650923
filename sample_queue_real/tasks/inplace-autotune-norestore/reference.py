def scale_shift_(x):
    x.mul_(2.0).add_(1.0)
    return x
