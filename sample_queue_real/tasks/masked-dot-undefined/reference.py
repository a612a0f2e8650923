import torch


def matmul(a, b):
    return a @ b
