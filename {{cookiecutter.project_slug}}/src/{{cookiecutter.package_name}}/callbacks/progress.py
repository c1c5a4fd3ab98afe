"""Lightning's Rich progress bar, updated every few steps instead of after every step.

Lightning turns every metric logged with `prog_bar=True` into a number (`.item()`) after
every training step, for the bar; on a GPU each `.item()` waits for the step to finish, so
the host can no longer queue the next step while the GPU works. Its drawing thread also
redraws up to 100 times a second, taking CPU time from the training loop. So the models log
the training loss without `prog_bar=True`, and this bar reads the metrics named in `show`
itself, only when it updates: every `every_n_steps` steps, redrawn at most `refresh_rate`
times a second.
"""

from collections.abc import Sequence

from pytorch_lightning.callbacks import RichProgressBar


class ProgressBar(RichProgressBar):
    def __init__(self, every_n_steps: int = 20, refresh_rate: int = 1, show: Sequence[str] = ("train/loss",), **kwargs):
        super().__init__(refresh_rate=refresh_rate, **kwargs)
        self.every_n_steps = every_n_steps
        self.show = tuple(show)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        done = batch_idx + 1
        if done % self.every_n_steps == 0 or done == self.total_train_batches:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def get_metrics(self, trainer, pl_module):
        metrics = super().get_metrics(trainer, pl_module)
        for name in self.show:  # as last logged (every trainer.log_every_n_steps steps)
            if name in trainer.callback_metrics:
                metrics[name] = float(trainer.callback_metrics[name])
        return metrics
