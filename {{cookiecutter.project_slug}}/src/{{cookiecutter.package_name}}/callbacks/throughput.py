"""Training throughput in samples per second, summed over all ranks and per rank (their mean).

Counted on the host with no device synchronisation per step, nor at the epoch's end where one
process trains (for_lightning); several ranks sum and average them in collectives once per
epoch. The clock starts when the first batch of the epoch is done (it includes starting the
data iterator) and stops at the last training batch, so validation is not counted. The
figures go to the logger and the progress bar, and into the log at the end.
"""

import time

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_info
from torch import distributed

TOTAL = "throughput/samples_per_sec"
PER_RANK = "throughput/samples_per_sec_per_rank"


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
        # Every rank logs, also with nothing measured: both are collectives (a value left
        # unsynced would make Lightning suggest sync_dist=True on every multi-process run).
        per_rank = for_lightning(self._samples / elapsed if elapsed > 0 else 0.0)
        pl_module.log(PER_RANK, per_rank, reduce_fx="mean", sync_dist=True)
        pl_module.log(TOTAL, per_rank, reduce_fx="sum", sync_dist=True, prog_bar=True)

    def on_train_end(self, trainer, pl_module):
        metrics = trainer.callback_metrics
        if TOTAL in metrics:
            rank_zero_info(
                f"Throughput of the last epoch: {float(metrics[TOTAL]):.0f} samples/s in total, "
                f"{float(metrics[PER_RANK]):.0f} per rank"
            )


def for_lightning(value: float) -> float | torch.Tensor:
    """Lightning makes a number a tensor on the model's device: on a GPU a copy that waits for
    all the work queued there, so that the host cannot prepare the next epoch meanwhile. With
    one process (no process group) a CPU tensor needs neither the copy nor a collective; with
    several, the sums are collectives on the device (NCCL has none for CPU tensors) that wait anyway."""
    if distributed.is_available() and distributed.is_initialized():
        return value
    return torch.tensor(value)
