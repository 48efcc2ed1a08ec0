import torch

from pkg.sched import Logged, Shared, Weighted


def fit(model, opt, loader):
    weigh, logged, shared = Weighted(model, opt, "weighted"), Logged(model, opt), Shared(model, opt)
    for x, ys in loader:
        losses = weigh(model(x), ys)
        print(losses["total"].item())
    for x, _ in loader:
        print(logged.update(x))
    for x, _ in loader:
        loss = shared.update(x)
        (loss * 0.5).backward()
