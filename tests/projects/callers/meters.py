class Tracker:
    def __init__(self):
        self.sums = {"box": 0.0, "fit": 0.0, "total": 0.0}
        self.seen = 0.0

    def add(self, losses):
        for key in losses:
            self.sums[key] += losses[key]

    def add_eval(self, value):
        self.seen += value

    def log_step(self, loss_value, lr):
        self.loss_sum += loss_value
        self.lr_sum += lr


class Window:
    def __init__(self):
        self.items = []

    def push(self, value):
        self.items.append(value)

    def put(self, value):
        self.items.append(value)
