import torch

from schedulers import Warmup


def fit(model, loader, opt, sched):
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        sched.step()
        opt.step()


def main(model, loader):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fit(model, loader, opt, Warmup(opt))
