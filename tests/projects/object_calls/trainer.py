class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def train_step(self, x, y):
        loss = (self.model(x) - y).pow(2).mean()
        loss.backward()
        self.optimizer.step()
        return loss


class CleanTrainer(Trainer):
    def train_step(self, x, y):
        self.optimizer.zero_grad()
        return super().train_step(x, y)
