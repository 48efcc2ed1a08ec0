import torch

import engine
import utils
from engine import clean_step, logged_step, train_one_epoch, train_step

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
criterion = torch.nn.MSELoss()
loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]

for batch in loader:
    train_step(model, batch, optimizer, criterion)

for x, y in loader:
    utils.fit_batch(model, x, y, optimizer, criterion)

for batch in loader:
    clean_step(model, batch, optimizer, criterion)

for batch in loader:
    optimizer.zero_grad()
    train_step(model, batch, optimizer, criterion)

for batch in loader:
    logged_step(model, batch, optimizer, criterion, print)

for epoch in range(3):
    scheduler.step()
    engine.train_one_epoch(model, loader, optimizer, criterion)

for epoch in range(3):
    train_one_epoch(model, loader, optimizer, criterion)
    scheduler.step()

print(utils.evaluate(model, loader))
