from utils.collector import Collector
from workers.trainer import Trainer


class Online(Trainer):
    def fit(self, loader, extra):
        for batch in loader:
            self.opt.zero_grad()
            loss = self.evaluate(self.model, batch, self.stats)
            loss.backward()
            self.opt.step()
        for batch in loader:
            self.opt.zero_grad()
            loss = self.score(self.model, batch, self.latest)
            loss.backward()
            self.opt.step()
        for batch in loader:
            fresh = Collector(["loss"])
            self.opt.zero_grad()
            loss = self.measure(self.model, batch, fresh)
            loss.backward()
            self.opt.step()
        for batch in loader:
            self.opt.zero_grad()
            loss = self.note(self.model, batch, self.stats)
            loss.backward()
            self.opt.step()
        for batch in loader:
            self.opt.zero_grad()
            loss = self.note(self.model, batch, extra)
            loss.backward()
            self.opt.step()

    def show(self, loader):
        for batch in loader:
            self.opt.zero_grad()
            loss, shown = self.shown(self.model, batch, self.stats)
            print(shown)
            self.opt.step()
