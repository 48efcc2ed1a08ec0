import torch

running = 0.0
for x, y in loader:
    loss = crit(model(x), y)
    loss.backward()
    optimizer.step()
    running += loss
