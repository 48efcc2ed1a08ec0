import torch.nn as nn


class PairLoss:
    def __init__(self, weight):
        self.mse = nn.MSELoss()
        self.l1 = nn.L1Loss()
        self.weight = weight

    def __call__(self, out, target):
        fit = self.mse(out, target)
        reg = self.l1(out, target)
        return fit + self.weight * reg, {"fit": fit, "reg": reg}


class ShownLoss:
    def __init__(self):
        self.mse = nn.MSELoss()

    def __call__(self, out, target):
        fit = self.mse(out, target)
        return fit, {"fit": fit.item(), "count": len(target)}


def build_pair(weight) -> PairLoss:
    return PairLoss(weight)


def build_shown() -> "ShownLoss":
    return ShownLoss()
