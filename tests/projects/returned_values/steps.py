def fit_batch(net, opt, inp, tgt):
    opt.zero_grad()
    err = net.score(inp, tgt)
    err.backward()
    opt.step()
    return err


def fit_parts(net, opt, crit, inp, tgt):
    opt.zero_grad()
    main = crit(net(inp), tgt)
    side = net.penalty()
    (main + side).backward()
    opt.step()
    return main, side, side.item()


def fit_plain(net, opt, inp, tgt):
    opt.zero_grad()
    err = net.score(inp, tgt)
    err.backward()
    opt.step()
    return err.item()


def fit_rebound(net, opt, inp, tgt):
    opt.zero_grad()
    err = net.score(inp, tgt)
    err.backward()
    opt.step()
    err = net.score(inp, tgt)
    return err
