import lightning as L


class GAN(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        g_opt, d_opt = self.optimizers()
        g_loss = self.generator_loss(batch)
        g_opt.zero_grad()
        self.manual_backward(g_loss)
        g_opt.step()
        d_loss = self.discriminator_loss(batch)
        d_opt.zero_grad()
        self.manual_backward(d_loss)
        d_opt.step()


model_engine, optimizer, trainloader, _ = deepspeed.initialize(args=cmd_args, model=net, model_parameters=params)
for step, batch in enumerate(trainloader):
    loss = model_engine(batch)
    model_engine.backward(loss)
    model_engine.step()
