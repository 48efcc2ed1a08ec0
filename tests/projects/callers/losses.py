import torch
import torch.nn.functional as F


def box_loss(pred, target, weight):
    scaled = torch.mul(pred.data, weight)
    return F.smooth_l1_loss(scaled, target * weight)


def target_loss(pred, target):
    goal = target.data
    return F.mse_loss(pred, goal)


def logged_loss(pred, target):
    return F.l1_loss(pred.detach(), target)


def eval_loss(pred, target):
    return F.l1_loss(pred.data, target)


def unused_loss(pred, target):
    return F.l1_loss(pred.data, target)


def item_loss(pred, target):
    return F.l1_loss(pred.data, target)


def pair_loss(pred, target):
    return F.l1_loss(pred, target), F.l1_loss(pred.data, target)


def distill_loss(student, teacher):
    return F.kl_div(student.log_softmax(1), teacher.detach().softmax(1))


def probe_loss(feat, target, head):
    return F.cross_entropy(head(feat.detach()), target)
