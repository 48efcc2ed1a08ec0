from collections import defaultdict

from criteria import build_pair, build_shown


class Runner:
    def __init__(self, net, opt):
        self.net = net
        self.opt = opt
        self.pair = build_pair(0.5)
        self.shown = build_shown()

    def fit_pair(self, inp, target):
        self.opt.zero_grad()
        total, parts = self.pair(self.net(inp), target)
        total.backward()
        self.opt.step()
        return parts

    def fit_shown(self, inp, target):
        self.opt.zero_grad()
        total, parts = self.shown(self.net(inp), target)
        total.backward()
        self.opt.step()
        return parts

    def epoch(self, batches):
        sums = defaultdict(float)
        shown = defaultdict(float)
        fits = []
        for inp, target in batches:
            parts = self.fit_pair(inp, target)
            fits.append(parts["fit"])
            for name, value in parts.items():
                sums[name] += value
            for name, value in self.fit_shown(inp, target).items():
                shown[name] += value
        return sums, shown, fits
