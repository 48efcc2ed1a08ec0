import torch

from meters import Columns, Converting, Ledger, RunningMean


def fit(net, opt, crit, batches):
    mean = RunningMean()
    cols = Columns(["a", "b"])
    book = Ledger()
    conv = Converting()
    for inp, tgt in batches:
        opt.zero_grad()
        err = crit(net(inp), tgt)
        aux = net(inp).abs().mean()
        err.backward()
        opt.step()
        mean.add(err, len(inp))
        cols.push([err.item(), aux])
        book["err"] = err
        conv.add(err)
        mean.add(err.item(), len(inp))
        fresh = RunningMean()
        fresh.add(err)
        with torch.no_grad():
            mean.add(crit(net(inp), tgt))
    return mean, cols, book, conv
