"""Per-batch helpers and a whole training epoch, called from main.py."""


def train_step(model, batch, optimizer, criterion):
    x, y = batch
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def clean_step(model, batch, optimizer, criterion):
    x, y = batch
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()


def train_one_epoch(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


def logged_step(model, batch, optimizer, criterion, logger):
    x, y = batch
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    logger.after_step(optimizer)  # a call this file cannot follow: it may clear the gradients
