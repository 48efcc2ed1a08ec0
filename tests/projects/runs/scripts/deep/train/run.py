import torch

from pkg.elsewhere import Lone
from pkg.models import Duo, Solo, Watched


def main(loader, env):
    duo, solo, lone, watched = Duo(), Solo(), Lone(), Watched()
    for batch in loader:
        duo.step(batch)
    for batch in loader:
        solo.critic.zero_grad()
        solo.step(batch)
    for batch in loader:
        lone.step(batch)
        env.step(batch)
    for batch in loader:
        watched.step(batch)
        watched.reset()
    with torch.no_grad():
        for batch in loader:
            Duo().step(batch)


if __name__ == "__main__":
    main([torch.randn(8, 4)] * 3, None)
