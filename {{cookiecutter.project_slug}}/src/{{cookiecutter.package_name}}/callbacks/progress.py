"""Lightning's Rich progress bar, updated every few steps instead of after every step.

Lightning turns every metric logged with `prog_bar=True` into a number (`.item()`) after
every training step, for the bar; on a GPU each `.item()` waits for the step to finish, so
the host can no longer queue the next step while the GPU works. Its drawing thread also
redraws up to 100 times a second, taking CPU time from the training loop. So the models log
the training loss without `prog_bar=True`, and this bar reads the metrics named in `show`
itself, only when it updates: every `every_n_steps` steps, redrawn at most `refresh_rate`
times a second. On a GPU it never waits for a value (ReadWithoutWaiting): it shows the
newest one the GPU has finished, at most one update old.
"""

from collections.abc import Sequence

import torch
from pytorch_lightning.callbacks import RichProgressBar


class ProgressBar(RichProgressBar):
    def __init__(self, every_n_steps: int = 20, refresh_rate: int = 1, show: Sequence[str] = ("train/loss",), **kwargs):
        super().__init__(refresh_rate=refresh_rate, **kwargs)
        self.every_n_steps = every_n_steps
        self.show = {name: ReadWithoutWaiting() for name in show}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        done = batch_idx + 1
        if done % self.every_n_steps == 0 or done == self.total_train_batches:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def get_metrics(self, trainer, pl_module):
        metrics = super().get_metrics(trainer, pl_module)
        for name, reader in self.show.items():  # as last logged (every trainer.log_every_n_steps steps)
            value = reader.read(trainer.callback_metrics.get(name))
            if value is not None:
                metrics[name] = value
        return metrics


class ReadWithoutWaiting:
    """A scalar tensor's value for display, read without waiting for a GPU.

    `.item()` on a GPU tensor waits for all the work queued so far, also at an epoch's end,
    where the host would otherwise prepare the next epoch while the GPU finishes this one.
    Here the value is copied to the host behind the work that makes it (a non-blocking copy,
    then an event), and read at a later call, once the event says it has arrived."""

    def __init__(self):
        self.value: float | None = None
        self._source: torch.Tensor | None = None  # the tensor last copied (or read)
        self._copy: tuple[torch.Tensor, torch.cuda.Event] | None = None

    def read(self, tensor: torch.Tensor | None) -> float | None:
        if tensor is None or not tensor.is_cuda:  # on the host: nothing to wait for
            return None if tensor is None else float(tensor)
        if self._copy is not None and self._copy[1].query():  # arrived
            self.value, self._copy = float(self._copy[0]), None
        if self._copy is None and tensor is not self._source:
            self._source = tensor
            copy = tensor.detach().to("cpu", non_blocking=True)  # into pinned memory, in stream order
            arrived = torch.cuda.Event()
            arrived.record()
            self._copy = (copy, arrived)
        return self.value
