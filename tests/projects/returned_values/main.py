from steps import fit_batch, fit_parts, fit_plain, fit_rebound


def run(net, opt, crit, batches):
    seen = 0.0
    trail = []
    shown = []
    for inp, tgt in batches:
        seen += fit_batch(net, opt, inp, tgt)
        main, side, side_value = fit_parts(net, opt, crit, inp, tgt)
        trail.append(side)
        shown.append(side_value)
        shown.append(fit_plain(net, opt, inp, tgt))
        shown.append(fit_rebound(net, opt, inp, tgt))
    print(seen, trail, shown)
