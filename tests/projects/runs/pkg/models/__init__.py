from pkg.models.pair import Duo, Lone, Solo, Watched
