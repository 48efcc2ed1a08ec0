class Collector:
    def __init__(self, keys):
        self.values = {k: [] for k in keys}

    def __setitem__(self, key, value):
        self.values[key].append(value)


class Latest:
    def __init__(self):
        self.values = {}

    def __setitem__(self, key, value):
        self.values[key] = value
