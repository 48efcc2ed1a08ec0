import torch

from schedulers import CosineCycle, WarmCosine


def fit(model, loader, opt, sched):
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        if sched is not None:
            sched.step()
        opt.step()


def main(model, loader, warm):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = None
    if warm:
        sched = WarmCosine(opt, 0.1, len(loader))
    elif warm is not None:
        sched = CosineCycle(opt, 0.1, len(loader))
    fit(model, loader, opt, sched)
