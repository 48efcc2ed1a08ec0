import torch


def apply_update(net, opt, clip, grad_scaler):
    if clip > 0:
        grad_scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
    grad_scaler.step(opt)
    opt.zero_grad()
    grad_scaler.update()
