from .steps import sgd_step


def run(net, data, optimizer, loss_fn):
    for inputs, targets in data:
        sgd_step(net, inputs, targets, optimizer, loss_fn)


def run_clean(net, data, optimizer, loss_fn):
    for inputs, targets in data:
        optimizer.zero_grad()
        sgd_step(net, inputs, targets, optimizer, loss_fn)
