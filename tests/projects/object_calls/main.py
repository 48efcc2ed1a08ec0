import torch

from trainer import Trainer

model = torch.nn.Linear(2, 1)
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
for x, y in [(torch.randn(4, 2), torch.randn(4, 1))] * 10:
    trainer.train_step(x, y)
