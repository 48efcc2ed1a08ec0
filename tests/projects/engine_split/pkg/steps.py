def sgd_step(net, inputs, targets, optimizer, loss_fn):
    loss = loss_fn(net(inputs), targets)
    loss.backward()
    optimizer.step()
