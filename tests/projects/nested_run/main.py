import torch

import epochs

model = torch.nn.Linear(2, 1)
adam = torch.optim.Adam(model.parameters())
sched = torch.optim.lr_scheduler.StepLR(adam, 5)
loader = [(torch.randn(4, 2), torch.randn(4, 1))]

for epoch in range(3):
    sched.step()
    epochs.train(model=model, loader=loader, optimizer=adam)
    epochs.evaluate(model, loader)
