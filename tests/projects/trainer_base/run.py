from trainers.base import BaseTrainer, ZeroingTrainer


class MyTrainer(BaseTrainer):
    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for batch in loader:
                self.train_step(batch)

    def fit_clean(self, loader):
        for batch in loader:
            self.clean_step(batch)

    def fit_zeroed(self, loader):
        for batch in loader:
            self.optimizer.zero_grad()
            self.train_step(batch)


class Inherits(ZeroingTrainer):
    def fit(self, loader):
        for batch in loader:
            self.train_step(batch)

    def fit_cleared(self, loader):
        for batch in loader:
            self.step_and_clear(batch)
