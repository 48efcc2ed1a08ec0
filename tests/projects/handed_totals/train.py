import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import ReduceLROnPlateau

from boards import Board, Courier, Deferred, Sink
from hooks import Hooks


def fit_board(net, opt, loader):
    board = Board()
    total = 0.0
    for x, y in loader:
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        total += loss
        board.record("total", total, weight=0.5)


def fit_deferred(net, opt, loader):
    later = Deferred()
    total = 0.0
    for x, y in loader:
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        total += loss
        later.hold(total)


def fit_courier(net, opt, loader):
    courier = Courier()
    total = 0.0
    for x, y in loader:
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        total += loss
        courier.send(total)


def fit_sink(net, opt, loader):
    sink = Sink()
    total = 0.0
    for x, y in loader:
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        total += loss
    sink.take(total)


class Runner:
    def __init__(self, net, opt, hooks=Hooks()):
        self.net = net
        self.opt = opt
        self.hooks = hooks
        self.lr_scheduler = ReduceLROnPlateau(opt)

    def epoch(self, loader):
        losses = []
        for x, y in loader:
            self.opt.zero_grad()
            loss = F.mse_loss(self.net(x), y)
            loss.backward()
            self.opt.step()
            losses.append(loss)
        mean = torch.stack(losses).mean()
        self.hooks.on_epoch(self, mean)
        self.lr_scheduler.step(mean)


class Stepper:
    """Named like a scheduler where it is kept, but its step back-propagates."""

    def step(self, value):
        value.backward()


class LoudHooks:
    def on_epoch(self, runner, mean):
        mean.backward()


class QuietHooks:
    def on_epoch(self, runner, mean):
        print(runner, mean)


class Variants:
    def __init__(self, net, opt, tracker, loud=LoudHooks(), quiet=QuietHooks()):
        self.net = net
        self.opt = opt
        self.tracker = tracker
        self.loud = loud
        self.quiet = quiet
        self.scheduler = Stepper()

    def stepped(self, loader):
        losses = []
        for x, y in loader:
            self.opt.zero_grad()
            loss = F.mse_loss(self.net(x), y)
            loss.backward()
            self.opt.step()
            losses.append(loss)
        self.scheduler.step(torch.stack(losses).mean())

    def tracked(self, loader):
        losses = []
        for x, y in loader:
            self.opt.zero_grad()
            loss = F.mse_loss(self.net(x), y)
            loss.backward()
            self.opt.step()
            losses.append(loss)
        self.tracker.step(torch.stack(losses).mean())

    def loudly(self, loader):
        losses = []
        for x, y in loader:
            self.opt.zero_grad()
            loss = F.mse_loss(self.net(x), y)
            loss.backward()
            self.opt.step()
            losses.append(loss)
        self.loud.on_epoch(self, torch.stack(losses).mean())

    def quietly(self, loader):
        losses = []
        for x, y in loader:
            self.opt.zero_grad()
            loss = F.mse_loss(self.net(x), y)
            loss.backward()
            self.opt.step()
            losses.append(loss)
        self.quiet.on_epoch(self, torch.stack(losses).mean())
