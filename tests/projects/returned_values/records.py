from collections import namedtuple
from typing import NamedTuple

Terms = namedtuple("Terms", ["fit", "extra", "whole"])
Marks = namedtuple("Marks", "fit whole")


class Split(NamedTuple):
    head: float
    tail: float


class Learner:
    def __init__(self, net, opt):
        self.net = net
        self.opt = opt

    def terms(self, inp, tgt):
        fit = self.net.score(inp, tgt)
        extra = self.net.penalty()
        return Terms(fit, extra, fit + extra)

    def update(self, inp, tgt):
        self.opt.zero_grad()
        got = self.terms(inp, tgt)
        got.whole.backward()
        self.opt.step()
        return got

    def update_marks(self, inp, tgt):
        self.opt.zero_grad()
        got = self.terms(inp, tgt)
        got.whole.backward()
        self.opt.step()
        return Marks(got.fit.item(), got.whole.item())

    def update_split(self, inp, tgt):
        self.opt.zero_grad()
        out = Split(*self.net.halves(inp, tgt))
        out.tail.backward()
        self.opt.step()
        return out
