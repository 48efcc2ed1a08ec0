import torch
from torch import nn

from critics import Critic


class Adversarial(nn.Module):
    def __init__(self, dim, device):
        super().__init__()
        self.encoder = nn.Linear(dim, dim)
        self.ranker = Critic(dim).to(device)

    def adversarial(self, x):
        return -torch.log(self.ranker(x)).mean()

    def fit(self, loader, optimizer, epochs):
        for epoch in range(epochs):
            adv_losses = []
            for x in loader:
                optimizer.zero_grad()
                rec = (self.encoder(x) - x).pow(2).mean()
                adv_losses.append(self.adversarial(x))
                rec.backward()
                optimizer.step()
            print(epoch, torch.stack(adv_losses).mean())
