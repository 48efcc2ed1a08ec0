import torch

import gradtools


def fit(net, loader, crit):
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        crit(net(x), y).backward()
        gradtools.clamp_grads(sgd, 1.0)
        print(gradtools.grad_norm(sgd))
        sgd.step()
