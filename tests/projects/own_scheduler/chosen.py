import torch

import schedulers


class Runner:
    def __init__(self, model, cfg):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.lr_scheduler = schedulers.make_cycle(cfg["schedule"], self.optimizer, cfg["steps"])

    def run(self, loader):
        for x, y in loader:
            self.optimizer.zero_grad()
            torch.nn.functional.mse_loss(self.model(x), y).backward()
            self.lr_scheduler.step()
            self.optimizer.step()
