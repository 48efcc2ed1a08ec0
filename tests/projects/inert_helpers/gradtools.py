import math

from vendor_lib import rescale


def clamp_grads(opt, bound):
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                p.grad.data.clamp_(-bound, bound)


def grad_norm(opt):
    total = 0.0
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                total += float(p.grad.norm()) ** 2
    return math.sqrt(total)


def wipe(opt):
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                p.grad.data.zero_()


def wipe_via_helper(opt):
    _fill(opt)


def _fill(opt):
    for group in opt.param_groups:
        for p in group["params"]:
            p.grad.fill_(0.0)


def vendor_clip(opt):
    rescale(opt)
