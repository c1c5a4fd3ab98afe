"""A training DataLoader that a checkpoint taken in the middle of an epoch resumes exactly.

Lightning 2.6 saves a train loader's `state_dict()` in every checkpoint and gives it back with
`load_state_dict()` before the resumed epoch's first batch. Without it a resume trained the first
batches of the epoch's order again and never its last ones (a run stopped at batch 5 of 20
trained batches 0-14), and one process drew a new order from wherever the random state was.

- EpochShuffle: the order of epoch e depends on the seed and e only (the order Lightning's
  DistributedSampler gives one process; under DDP it puts its own in, which does the same).
- ResumableLoader: its state is the epoch and the batches handed out in it; a resume into that
  epoch leaves out as many (their indices only: no sample is read).
"""

import itertools
import os

import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler


def run_seed() -> int:
    """The seed Lightning's seed_everything set (as DistributedSampler's), 0 before it."""
    return int(os.environ.get("PL_GLOBAL_SEED", 0))


class EpochShuffle(RandomSampler):
    """A RandomSampler (Lightning's DDP takes it for shuffled data) whose order is
    randperm(seed + epoch): Lightning calls set_epoch before each epoch."""

    def __init__(self, data_source, seed: int | None = None):
        super().__init__(data_source)
        self.seed = run_seed() if seed is None else seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        order = torch.Generator().manual_seed(self.seed + self.epoch)
        yield from torch.randperm(len(self.data_source), generator=order).tolist()


class SkippingBatches(BatchSampler):
    """torch's BatchSampler, leaving out the first `skip` batches (ResumableLoader sets it for each
    epoch: a loader with workers draws an epoch's batches twice, and uses the second)."""

    skip = 0

    def __iter__(self):
        return itertools.islice(super().__iter__(), self.skip, None)


class ResumableLoader(DataLoader):
    """A DataLoader over a batch sampler with `skip` (SkippingBatches, in_memory.IndexBatches).
    No __init__ of its own: Lightning builds it again with the DataLoader's arguments under DDP."""

    _position = (0, 0)  # (epoch, batches handed out in it)
    _resume_at = None  # the same, from a checkpoint, until the epoch it names begins

    def state_dict(self) -> dict:
        # What the epoch's order of samples comes from: the batches' size, the processes that share it,
        # the seed and the number of samples. A resume with others would not continue at the same
        # sample (launch/resume_checks.py: check_mid_epoch_batches).
        sampler = self.batch_sampler.sampler
        processes = getattr(sampler, "num_replicas", 1)  # Lightning's DistributedSampler
        position = {"epoch": self._position[0], "batches": self._position[1]}
        order = {"seed": getattr(sampler, "seed", None), "samples": len(self.dataset)}
        return position | {"batch_size": self.batch_sampler.batch_size, "processes": processes} | order

    def load_state_dict(self, state: dict) -> None:
        self._resume_at = (state["epoch"], state["batches"])

    def __iter__(self):  # a generator: runs at the first batch, after Lightning's set_epoch
        epoch = getattr(self.batch_sampler.sampler, "epoch", 0)
        skip = self._resume_at[1] if self._resume_at is not None and self._resume_at[0] == epoch else 0
        self._resume_at, self.batch_sampler.skip = None, skip  # for this epoch only: the next sets its own
        handed_out = skip
        for batch in super().__iter__():
            handed_out += 1
            self._position = (epoch, handed_out)
            yield batch
