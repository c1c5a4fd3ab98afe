"""A dataset that lives in memory as tensors and hands out whole batches in one indexing op.

MNIST-sized data needs no per-sample Python work (no PIL, no transforms, no collate of
thousands of small tensors): the DataLoader asks for a batch of indices and gets the batch.
Lightning can still wrap it in a DistributedSampler, because it is an ordinary Dataset.
"""

import functools
import itertools

import numpy as np
import torch
from torch.utils.data import BatchSampler, Dataset, Sampler


class InMemoryImages(Dataset):
    """uint8 images [N, C, H, W] and int64 labels [N]."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels")
        self.images = images
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.images[index], self.labels[index]

    def to(self, device) -> "InMemoryImages":
        return InMemoryImages(self.images.to(device), self.labels.to(device))

    def __getitems__(self, indices: torch.Tensor | list[int]):
        # The DataLoader calls this with all indices of a batch (torch >= 2.0): from IndexBatches
        # a tensor already where the data is.
        index = self.index_on_device(indices)
        return self.images.index_select(0, index), self.labels.index_select(0, index)

    def index_on_device(self, indices: torch.Tensor | list[int]) -> torch.Tensor:
        index = torch.as_tensor(indices)
        if index.device == self.labels.device or not self.labels.is_cuda:
            return index
        # A plain copy to the GPU (torch.as_tensor(..., device=)) waits until the GPU has
        # finished all work queued so far: every step, the host would stop queuing the next
        # one. From pinned memory, non_blocking, the copy takes its turn in the stream.
        return index.pin_memory().to(self.labels.device, non_blocking=True)


class IndexBatches(BatchSampler):
    """The batches of an in-memory set, as index tensors where the data lives: the sampler's
    indices for 32 batches at a time become one tensor, moved to the device in one copy, and
    each batch's indices are a slice of it.

    The batches are those of torch's BatchSampler over the same sampler (Lightning puts its
    DistributedSampler in, as for any BatchSampler). Saved per step: a Python list of ints, a
    tensor built from it, and on a GPU its pinning and copy there: host time, which sets the
    pace of small models on a GPU. 32 batches at a time, not the whole epoch: the epoch's first
    batch, which often follows a wait for the GPU at the end of the last epoch, waits for no
    more than before (the whole order of MNIST's 60000 samples takes 6 ms of a CPU core).
    """

    batches_per_copy = 32
    skip = 0  # the first batches left out: set for each epoch by a resumable loader (resumable.py)

    def __init__(self, sampler: Sampler[int], batch_size: int, drop_last: bool, device: torch.device | str = "cpu"):
        super().__init__(sampler, batch_size, drop_last)
        self.device = torch.device(device)

    def __iter__(self):
        indices = iter(self.sampler)  # draws the epoch's shuffle, as torch's BatchSampler does
        next(itertools.islice(indices, self.skip * self.batch_size, self.skip * self.batch_size), None)  # indices only
        remaining = len(self) - self.skip  # drop_last: the last, partial batch is not among them
        while remaining > 0:
            count = min(remaining, self.batches_per_copy)
            # numpy reads the ints straight into an array (faster than a list, then a tensor of it)
            chunk = torch.from_numpy(np.fromiter(itertools.islice(indices, count * self.batch_size), dtype=np.int64))
            if len(chunk) == 0:  # a sampler shorter than its len()
                return
            if self.device.type == "cuda":  # pinned and non_blocking: the host does not wait for the GPU
                chunk = chunk.pin_memory().to(self.device, non_blocking=True)
            batches = chunk.split(self.batch_size)[:count]
            remaining -= len(batches)
            yield from batches


def already_batched(batch):
    """collate_fn for InMemoryImages: `__getitems__` already returns the batch."""
    return batch


def normalize(images: torch.Tensor, mean: float, std: float) -> torch.Tensor:
    """uint8 -> float32, done per batch after it reached the device (4x less to copy).

    (x / 255 - mean) / std as one operation, shift + scale * x: the conversion, the scale and
    the shift in one pass (on a GPU one kernel launch, not three). The shift is a zero-dim CPU
    tensor, which torch takes as a number on any device; uint8 with it gives float32.
    """
    if images.dtype != torch.uint8:
        images = images.float()
    return torch.add(_as_cpu_scalar(-mean / std), images, alpha=1 / (255 * std))


@functools.cache
def _as_cpu_scalar(value: float) -> torch.Tensor:
    return torch.tensor(value)  # made once: a new tensor per step is one more operator
