import torch

import engine as eng

net = torch.nn.Linear(4, 1)
adam = torch.optim.Adam(net.parameters())
warmup = torch.optim.lr_scheduler.LinearLR(adam, start_factor=0.1, total_iters=5)
batches = [(torch.randn(8, 4), torch.randn(8, 1))]

epoch = 0
while epoch < 5:
    warmup.step()
    eng.train_one_epoch(net, batches, adam, torch.nn.functional.l1_loss)
    epoch += 1
