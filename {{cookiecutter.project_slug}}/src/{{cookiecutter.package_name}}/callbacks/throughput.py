"""Training throughput in samples per second, summed over all ranks and per rank (their mean).

Counted on the host with no device synchronisation per step, nor at the epoch's end where one
process trains; several ranks sum their figures in one collective once per epoch. The clock
starts when the first batch of the epoch is done (it includes starting the data iterator) and
stops at the last training batch, so validation is not counted. The figures go to the loggers,
the progress bar and `trainer.callback_metrics` (as CPU tensors), and into the log at the end.

Not through `self.log`: at an epoch's end its result collection copies each value's metadata
and moves it to the model's device (on a GPU a copy that waits for all the work queued there),
and then every logger flushes its file: about 1,800 Python calls and 2 ms on the development
CPU per epoch, while the GPU may wait for the next epoch's first step (docs/performance.md).
"""

import time

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_info

TOTAL = "throughput/samples_per_sec"
PER_RANK = "throughput/samples_per_sec_per_rank"
BAR = "samples/s"  # the bar's name for TOTAL: short enough that Rich does not cut it


class Throughput(pl.Callback):
    def on_train_start(self, trainer, pl_module):
        # A run resumed in the middle of an epoch (a requeued Slurm job) gets no on_train_epoch_start.
        self.on_train_epoch_start(trainer, pl_module)

    def on_train_epoch_start(self, trainer, pl_module):
        self._samples = 0
        self._start = self._last = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        now = time.perf_counter()
        if self._start is None:
            self._start = now
        else:
            self._samples += len(batch[0])
        self._last = now

    def on_train_epoch_end(self, trainer, pl_module):
        elapsed = (self._last or 0.0) - (self._start or 0.0)
        total = self._samples / elapsed if elapsed > 0 else 0.0
        if trainer.world_size > 1:  # every rank, also with nothing measured: it is a collective
            here = torch.tensor(total, device=trainer.strategy.root_device)
            total = float(trainer.strategy.reduce(here, reduce_op="sum"))
        if total == 0.0:  # no batches measured (resumed at the epoch's end): no figure, not a 0 in the plots
            return
        figures = {TOTAL: total, PER_RANK: total / trainer.world_size}
        for logger in trainer.loggers:  # rank 0 writes; the file is flushed at the logger's next save
            logger.log_metrics(figures, step=trainer.global_step)
        trainer.callback_metrics.update({name: torch.tensor(value) for name, value in figures.items()})
        trainer.progress_bar_metrics[BAR] = f"{total:.0f}"  # text: the bar writes numbers with 3 decimals

    def on_train_end(self, trainer, pl_module):
        metrics = trainer.callback_metrics
        if TOTAL in metrics:
            rank_zero_info(
                f"Throughput of the last epoch: {float(metrics[TOTAL]):.0f} samples/s in total, "
                f"{float(metrics[PER_RANK]):.0f} per rank"
            )
