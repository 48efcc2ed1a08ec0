def fit_batch(model, x, y, opt, loss_fn):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()


def evaluate(model, loader):
    return sum(float(model(x).mean()) for x, _ in loader)
