import math

from torch.optim import lr_scheduler


class Phase:
    def __init__(self, start, end, steps):
        self.start, self.end, self.steps, self.n = start, end, steps, 0

    def rate(self):
        self.n += 1
        return self.end + (self.start - self.end) * (1 + math.cos(math.pi * self.n / self.steps)) / 2


class CosineCycle(object):
    """Sets the rate of the step about to run: meant to be stepped before optimizer.step()."""

    def __init__(self, optimizer, top, steps):
        self.optimizer = optimizer
        self.phase = Phase(top, 0.0, steps)

    def step(self):
        for group in self.optimizer.param_groups:
            group["lr"] = self.phase.rate()


class WarmCosine(CosineCycle):
    pass


class Warmup(lr_scheduler._LRScheduler):
    def get_lr(self):
        return [base * min(1.0, self.last_epoch / 100) for base in self.base_lrs]


class Delegating:
    """A plain wrapper that sets no rate itself: it steps a torch scheduler it holds."""

    def __init__(self, optimizer):
        self.inner = lr_scheduler.StepLR(optimizer, 10)

    def step(self):
        self.inner.step()


def make_cycle(kind, optimizer, steps):
    """Chooses one of this file's own schedulers by configuration."""
    if kind == "warm":
        return WarmCosine(optimizer, 0.1, steps)
    elif kind == "cycle":
        return CosineCycle(optimizer, 0.1, steps)
    raise ValueError(kind)


def make_any(kind, optimizer, steps):
    """Chooses between an own scheduler and one derived from torch's."""
    if kind == "warmup":
        return Warmup(optimizer)
    return CosineCycle(optimizer, 0.1, steps)
