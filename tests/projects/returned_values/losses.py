def composite(net, inp, tgt, crit):
    fit = crit(net(inp), tgt)
    reg = net(inp).pow(2).mean()
    return fit + reg, reg, reg.item()


def with_penalty(net, inp, tgt, crit):
    fit = crit(net(inp), tgt)
    extra = net.penalty()
    count = len(inp)
    return fit + 0.1 * extra, extra, count
