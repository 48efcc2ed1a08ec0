import torch

from engine import train_one_epoch

model = torch.nn.Linear(4, 1)
opt = torch.optim.AdamW(model.parameters())
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
data = [(torch.randn(8, 4), torch.randn(8, 1))]

for epoch in range(10):
    sched.step()
    train_one_epoch(model, data, opt, torch.nn.functional.mse_loss)

for epoch in range(10):
    if epoch > 0:
        sched.step()
    train_one_epoch(model, data, opt, torch.nn.functional.mse_loss)
