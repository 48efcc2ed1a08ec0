import torch.nn as nn


class twin_coder(nn.Module):
    """Clears its own gradients first thing in forward: every optimizer over its parameters starts clean."""

    def __init__(self):
        super().__init__()
        self.front = nn.Linear(4, 4)
        self.back = nn.Linear(4, 1)

    def forward(self, x):
        self.zero_grad()
        return self.back(self.front(x)).mean()


class lone_coder(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Linear(4, 1)

    def forward(self, x):
        return self.front(x).mean()
