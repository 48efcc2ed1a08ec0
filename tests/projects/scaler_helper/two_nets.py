from amp_utils import apply_update


def fit(actor, critic, batches, actor_opt, critic_opt, grad_scaler):
    for obs in batches:
        grad_scaler.scale(actor(obs).mean()).backward()
        apply_update(actor, actor_opt, 1.0, grad_scaler)
        grad_scaler.scale(critic(obs).mean()).backward()
        apply_update(critic, critic_opt, 1.0, grad_scaler)
