import torch
from torch import nn

from losses import box_loss, distill_loss, eval_loss, item_loss, logged_loss, pair_loss, probe_loss, target_loss
from meters import Tracker, Window


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)

    def forward(self, x):
        return self.body(x)


def make_targets(y):
    return y * 2


def main(loader, val_loader):
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    tracker = Tracker()
    for x, y in loader:
        out = net(x)
        goal = make_targets(y)
        losses = {"box": box_loss(out, goal, 0.5), "fit": target_loss(out, goal)}
        aux = item_loss(out.detach(), goal)
        main_part, side = pair_loss(out, goal)
        losses["total"] = losses["box"] + losses["fit"] + aux + main_part
        opt.zero_grad()
        losses["total"].backward()
        opt.step()
        print(logged_loss(out, goal).item(), side.item())
        tracker.add(losses)
        window = Window()
        window.push(losses)
        window.put(losses["total"].item())
    with torch.no_grad():
        for x, y in val_loader:
            out = net(x)
            tracker.add_eval(eval_loss(out, y))


def main_amp(loader, amp_opt):
    net = Net()
    tracker = Tracker()
    for x, y in loader:
        loss = net(x).sum()
        amp_opt.backward(loss)
        amp_opt.step()
        amp_opt.zero_grad()
        tracker.log_step(float(loss), amp_opt.param_groups[0]["lr"])


def main_distill(loader):
    net = Net()
    teacher = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        student_out = net(x)
        teacher_out = teacher(x)
        loss = distill_loss(student_out, teacher_out) + probe_loss(student_out, y, net.body)
        opt.zero_grad()
        loss.backward()
        opt.step()
