import torch

from epochs import train

model = torch.nn.Linear(2, 1)
sgd = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(sgd, 5)
loader = [(torch.randn(4, 2), torch.randn(4, 1))]

for epoch in range(3):
    train(model, loader, sgd)
    sched.step()
