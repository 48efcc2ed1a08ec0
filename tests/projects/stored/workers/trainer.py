from utils.collector import Collector, Latest
from workers.base import Base


class Trainer(Base):
    def __init__(self, model, opt):
        self.model, self.opt = model, opt
        self.stats = Collector(["loss"])
        self.latest = Latest()
