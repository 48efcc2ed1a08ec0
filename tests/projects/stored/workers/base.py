class Base:
    def evaluate(self, model, batch, stats):
        loss = model(batch).mean()
        stats["loss"] = loss
        return loss

    def score(self, model, batch, stats):
        loss = model(batch).mean()
        stats["loss"] = loss
        return loss

    def measure(self, model, batch, stats):
        loss = model(batch).mean()
        stats["loss"] = loss
        return loss

    def note(self, model, batch, stats):
        loss = model(batch).mean()
        stats["loss"] = loss
        return loss

    def shown(self, model, batch, stats):
        loss = model(batch).mean()
        stats["loss"] = loss
        return loss, loss.item()
