class Hooks:
    """Does nothing by default; meant to be overridden."""

    def on_epoch(self, runner, mean):
        pass

    def on_batch(self, runner, value):
        pass
