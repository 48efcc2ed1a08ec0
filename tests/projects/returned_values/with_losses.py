from losses import composite


def run(net, opt, crit, batches):
    trail = []
    shown = []
    for inp, tgt in batches:
        opt.zero_grad()
        total, reg, reg_value = composite(net, inp, tgt, crit)
        total.backward()
        opt.step()
        trail.append(reg)
        shown.append(reg_value)
    print(trail, shown)
