"""Training throughput in samples per second, per rank and summed over all ranks.

Counted on the host with no device synchronisation per step; the only collective is one
sum per epoch. The clock stops at the last training batch, so validation is not counted.
"""

import time

import pytorch_lightning as pl


class Throughput(pl.Callback):
    def on_train_start(self, trainer, pl_module):
        # A run resumed in the middle of an epoch (a requeued Slurm job) gets no on_train_epoch_start.
        self.on_train_epoch_start(trainer, pl_module)

    def on_train_epoch_start(self, trainer, pl_module):
        self._samples = 0
        self._start = self._last = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._samples += len(batch[0])
        self._last = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module):
        elapsed = self._last - self._start
        if self._samples == 0 or elapsed <= 0:
            return
        per_rank = self._samples / elapsed
        pl_module.log("throughput/samples_per_sec_per_rank", per_rank)
        pl_module.log("throughput/samples_per_sec", per_rank, reduce_fx="sum", sync_dist=True, prog_bar=True)
