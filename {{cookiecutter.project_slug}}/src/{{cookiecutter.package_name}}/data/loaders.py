"""One DataLoader for both kinds of dataset: in-memory tensors and samples read one by one."""

import os
import signal

import torch
from lightning_fabric.utilities.seed import pl_worker_init_function
from torch.utils.data import DataLoader, Dataset, SequentialSampler

from .in_memory import IndexBatches, InMemoryImages, already_batched
from .resumable import EpochShuffle, ResumableLoader, SkippingBatches, run_seed


def make_loader(dataset: Dataset, batch_size: int, shuffle: bool, num_workers: int = 0, sampler=None) -> DataLoader:
    # In memory: the DataLoader asks for a batch of indices and gets the batch (no collate);
    # on a GPU that is a GPU tensor, which workers cannot index. drop_last: every training step
    # the same size on every rank. With workers, a thread pins their batches for fast copies to
    # the GPU, and the workers live on between epochs. Shuffled (training): resumable in the
    # middle of an epoch (resumable.py).
    in_memory = isinstance(dataset, InMemoryImages)
    workers = 0 if in_memory and dataset.images.is_cuda else num_workers
    options = {
        "num_workers": workers,
        "persistent_workers": workers > 0,
        "pin_memory": workers > 0 and torch.cuda.is_available(),
        # Its own generator for the seed each epoch's iterator draws (for its workers): the global
        # random state is the model's alone, and a resumed run's is as saved (callbacks/random_states.py).
        "generator": torch.Generator().manual_seed(run_seed()),
        "worker_init_fn": leave_stops_to_the_main_process,
    }
    if sampler is None:
        sampler = EpochShuffle(dataset) if shuffle else SequentialSampler(dataset)
    loader = ResumableLoader if shuffle else DataLoader
    if in_memory:  # each batch's indices a slice of one index tensor per 32 batches, where the data is
        batches = IndexBatches(sampler, batch_size, drop_last=shuffle, device=dataset.labels.device)
        return loader(dataset, batch_sampler=batches, collate_fn=already_batched, **options)
    return loader(dataset, batch_sampler=SkippingBatches(sampler, batch_size, drop_last=shuffle), **options)


def leave_stops_to_the_main_process(worker_id: int) -> None:
    """Run in each DataLoader worker as it starts. Slurm's time limit and scancel, `timeout` and
    a terminal's Ctrl-C signal every process of a run, its workers too: torch's workers died of
    SIGTERM, and the main process then stopped on "DataLoader worker ... is killed by signal"
    before its stop's save (callbacks/stop.py), exit 1. The main process decides how the run
    ends; its workers serve batches until it shuts them down (or it dies: they watch for that)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.environ.get("PL_SEED_WORKERS") == "1":  # what Lightning adds where a loader has no worker_init_fn
        pl_worker_init_function(worker_id)
