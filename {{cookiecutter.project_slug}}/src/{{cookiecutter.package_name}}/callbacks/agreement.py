"""A flag raised on one rank (by a signal) and acted on by every rank at the same step.

A signal reaches each rank at its own moment (SIGTERM, Ctrl-C, SIGUSR1): the ranks must
agree on it, or one leaves while the others wait for it in the next all-reduce. Agreeing
is a collective whose answer the host reads, and on a GPU that read waits for all the work
queued so far: done at every step, the host can no longer queue the next step while the GPU
works (Lightning 2.6 does it for SIGTERM: Lightning issue #21487). Here the ranks agree only
every `interval` steps; rank 0 picks the next interval from its own clock, in the same
all-reduce, so that they agree about every `seconds`. One process has nothing to agree on.
"""

from time import monotonic

import torch

MOST_STEPS_BETWEEN = 1000


def between_optimizer_steps(trainer) -> bool:
    """In on_train_batch_end: gradients accumulate over several batches and this one did not step
    the optimizer. A save here would lose the gradients accumulated so far, and the resumed epoch
    leaves their batches out: a stop or requeue waits for the batch that steps (at most
    accumulate_grad_batches - 1 more)."""
    return trainer.accumulate_grad_batches > 1 and trainer.fit_loop.epoch_loop._should_accumulate()


class AgreedFlag:
    def __init__(self, seconds: float = 1.0):
        self.seconds = seconds
        self.steps_left = 1  # agree at the first step
        self.interval = 1
        self.last_agreed: float | None = None

    def agreed(self, trainer, flag: bool) -> bool:
        """Call on every rank at the same points (each batch's end). True on every rank, at
        the same call, once any rank has raised its flag: at once where one process trains."""
        if trainer.world_size == 1:
            return flag
        self.steps_left -= 1
        if self.steps_left > 0:
            return False
        values = torch.tensor([float(flag), self._next_interval(trainer)], device=trainer.strategy.root_device)
        raised, interval = trainer.strategy.reduce(values, reduce_op="max").tolist()  # the others send 0
        self.steps_left = self.interval = int(interval)
        return raised > 0

    def _next_interval(self, trainer) -> float:
        """Rank 0's choice: as many steps as take about `seconds` at the pace since the last time."""
        if not trainer.is_global_zero:
            return 0.0
        now, last = monotonic(), self.last_agreed
        self.last_agreed = now
        if last is None:
            return 1.0
        seconds_per_step = max((now - last) / self.interval, 1e-6)
        return float(max(1, min(MOST_STEPS_BETWEEN, int(self.seconds / seconds_per_step))))
