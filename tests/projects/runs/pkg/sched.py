import torch


class Weighted:
    def __init__(self, model, opt, mode):
        self.model, self.opt, self.mode = model, opt, mode

    def __call__(self, preds, labels):
        if self.mode == "sum":
            return self._summed(preds, labels)
        return self._weighted(preds, labels)

    def _summed(self, preds, labels):
        self.opt.zero_grad()
        total = sum((p - y).pow(2).mean() for p, y in zip(preds, labels))
        total.backward()
        self.opt.step()
        return {"total": total.item()}

    def _weighted(self, preds, labels):
        self.opt.zero_grad()
        losses = {}
        for k, (p, y) in enumerate(zip(preds, labels)):
            losses[k] = (p - y).pow(2).mean()
        total = sum(losses.values())
        total.backward(retain_graph=True)
        self.opt.step()
        losses["total"] = total
        return losses


class Logged:
    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def update(self, x):
        self.opt.zero_grad()
        loss = self.model(x).mean()
        loss.backward(retain_graph=True)
        self.opt.step()
        return loss.item()


class Shared:
    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def update(self, x):
        self.opt.zero_grad()
        loss = self.model(x).mean()
        loss.backward(retain_graph=True)
        self.opt.step()
        return loss
