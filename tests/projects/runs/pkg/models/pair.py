import torch
from torch import nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)
        self.optimizer = torch.optim.Adam(self.parameters())


class Painter(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(2, 4)
        self.optimizer = torch.optim.Adam(self.parameters())


class Duo:
    def __init__(self):
        self.critic, self.painter = Critic(), Painter()

    def step(self, batch):
        real = self.critic.net(batch).mean()
        real.backward()
        self.critic.optimizer.step()
        self.painter.zero_grad()
        fake = -self.critic.net(self.painter.net(torch.randn(8, 2))).mean()
        fake.backward()
        self.painter.optimizer.step()
        return real.item(), fake.item()


class Solo:
    def __init__(self):
        self.critic = Critic()

    def step(self, batch):
        self.critic.net(batch).mean().backward()
        self.critic.optimizer.step()


class Lone:
    def __init__(self):
        self.critic = Critic()

    def step(self, batch):
        self.critic.net(batch).mean().backward()
        self.critic.optimizer.step()


class Watched:
    def __init__(self):
        self.critic = Critic()

    def step(self, batch):
        self.critic.net(batch).mean().backward()
        self.critic.optimizer.step()

    def reset(self):
        self.critic.optimizer.zero_grad()
