import torch

scaler = torch.cuda.amp.GradScaler()
for epoch in range(epochs):
    for input, target in data:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            output = model(input)
            loss = loss_fn(output, target)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()

optimizer = torch.optim.LBFGS(model.parameters(), lr=1)
for step in range(20):
    def closure():
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        return loss
    optimizer.step(closure)

for episode in range(1000):
    state = env.reset()
    log_probs, rewards = [], []
    done = False
    while not done:
        probs = policy(state)
        action = probs.multinomial(1)
        state, reward, done, _ = env.step(action.item())
        log_probs.append(probs.log()[action])
        rewards.append(reward)
    returns = compute_returns(rewards)
    policy_loss = torch.stack([-lp * r for lp, r in zip(log_probs, returns)]).sum()
    optimizer.zero_grad()
    policy_loss.backward()
    optimizer.step()
