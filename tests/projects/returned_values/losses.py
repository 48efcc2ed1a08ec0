def composite(net, inp, tgt, crit):
    fit = crit(net(inp), tgt)
    reg = net(inp).pow(2).mean()
    return fit + reg, reg, reg.item()
