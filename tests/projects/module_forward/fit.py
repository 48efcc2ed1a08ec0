import torch
from layers import *


def fit_twin(batches):
    net = twin_coder()
    front_opt = torch.optim.SGD(net.front.parameters(), lr=0.1)
    back_opt = torch.optim.SGD(net.back.parameters(), lr=0.1)
    for x in batches:
        loss = net(x)
        loss.backward()
        front_opt.step()
        back_opt.step()


def fit_lone(batches):
    net = lone_coder()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x in batches:
        loss = net(x)
        loss.backward()
        opt.step()


def fit_twin_and_head(batches):
    net = twin_coder()
    head = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    head_opt = torch.optim.SGD(head.parameters(), lr=0.1)
    for x in batches:
        loss = net(x) + head(x).mean()
        loss.backward()
        opt.step()
        head_opt.step()
