import torch

from trainer import Trainer


class Loop:
    def __init__(self, model):
        self.engine = Trainer(model, torch.optim.Adam(model.parameters()))

    def fit(self, data):
        for x, y in data:
            self.engine.train_step(x, y)
