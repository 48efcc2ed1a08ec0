from amp_utils import apply_update


def fit(net, batches, opt, grad_scaler):
    for obs in batches:
        grad_scaler.scale(net(obs).mean()).backward()
        apply_update(net, opt, 0.5, grad_scaler)
