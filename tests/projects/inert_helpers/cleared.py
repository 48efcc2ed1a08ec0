import torch

import gradtools


def fit(net, loader, crit):
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        gradtools.wipe(sgd)
        crit(net(x), y).backward()
        sgd.step()


def fit_helper(net, loader, crit):
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        gradtools.wipe_via_helper(sgd)
        crit(net(x), y).backward()
        sgd.step()


def fit_vendor(net, loader, crit):
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        crit(net(x), y).backward()
        gradtools.vendor_clip(sgd)
        sgd.step()
