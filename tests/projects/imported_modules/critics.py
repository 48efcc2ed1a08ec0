import torch
from torch import nn


class Critic(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, x):
        return torch.sigmoid(self.score(x))
