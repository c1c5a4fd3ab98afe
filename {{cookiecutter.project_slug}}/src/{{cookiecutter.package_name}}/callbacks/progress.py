"""Lightning's Rich progress bar, updated every few steps instead of after every step.

After every training step Lightning's RichProgressBar reads the logged metrics to show
them, and each read is a `.item()`: on a GPU that waits for the step to finish, so the host
can no longer queue the next step while the GPU works. Its drawing thread also redraws up
to 100 times a second, taking CPU time from the training loop. This one reads the metrics
every `every_n_steps` steps and redraws at most `refresh_rate` times a second (once: the
numbers change only every few steps anyway).
"""

from pytorch_lightning.callbacks import RichProgressBar


class ProgressBar(RichProgressBar):
    def __init__(self, every_n_steps: int = 20, refresh_rate: int = 1, **kwargs):
        super().__init__(refresh_rate=refresh_rate, **kwargs)
        self.every_n_steps = every_n_steps

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        done = batch_idx + 1
        if done % self.every_n_steps == 0 or done == self.total_train_batches:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
