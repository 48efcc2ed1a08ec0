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
