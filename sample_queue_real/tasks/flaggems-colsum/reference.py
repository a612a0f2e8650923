

def colsum(x):
    return x.sum(dim=0)
