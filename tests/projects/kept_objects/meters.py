class RunningMean:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def add(self, value, n=1):
        self.total += value * n
        self.count += n


class Columns:
    def __init__(self, names):
        self.sums = [0.0] * len(names)

    def push(self, values):
        for i, v in enumerate(values):
            self.sums[i] += v


class Ledger:
    def __init__(self):
        self.rows = collections.defaultdict(list)

    def __setitem__(self, key, value):
        self.rows[key].append(value)


class Converting:
    def __init__(self):
        self.total = 0.0

    def add(self, value):
        self.total += float(value)
