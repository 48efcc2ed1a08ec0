from losses import with_penalty


def run(net, opt, crit, batches):
    trail = []
    sizes = []
    for inp, tgt in batches:
        opt.zero_grad()
        total, extra, count = with_penalty(net, inp, tgt, crit)
        total.backward()
        opt.step()
        trail.append(extra)
        sizes.append(count)
    print(trail, sizes)
