"""Shared plumbing of the DataModules: where the sets live, loaders, per-batch normalisation."""

import os

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_info
from torch.utils.data import Dataset

from ..launch.errors import SetupError
from .in_memory import InMemoryImages, normalize
from .loaders import make_loader
from .workers import resolve_workers


class ImageDataModule(pl.LightningDataModule):
    """Subclasses fill `train_set`, `val_set` and `test_set` in `setup`: InMemoryImages, or a
    dataset read sample by sample (per_sample.py) for data that does not fit in memory.

    on_device: on a GPU, hold each in-memory set there (one copy per process) and cut batches
    there: no copies from the host per step. num_workers: DataLoader worker processes per rank,
    for data on the host; `auto` sizes them from the CPUs Slurm gives each task (data/workers.py).
    """

    mean = 0.5
    std = 0.5

    def __init__(self, batch_size: int, num_workers: int | str = "auto", on_device: bool = True):
        super().__init__()
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.on_device = on_device
        self.train_set: Dataset | None = None
        self.val_set: Dataset | None = None
        self.test_set: Dataset | None = None

    def train_samples(self) -> int | None:
        """How many training samples setup() will make, known without making them (None: unknown)."""
        return None

    def val_samples(self) -> int | None:
        """How many validation samples setup() will make (None: unknown)."""
        return None

    def test_samples(self) -> int | None:
        """How many test samples setup() will make (None: unknown)."""
        return None

    def split_settings(self) -> dict:
        """The settings (as `data.<key>`) that decide which samples the run trains on and which it holds
        out to validate. Kept in every checkpoint: a resume with others would validate on samples the
        weights have trained on (launch/resume_checks.py: check_same_split)."""
        return {}

    def state_dict(self) -> dict:
        return {"split": self.split_settings()}

    def load_state_dict(self, state: dict) -> None:
        """Nothing to restore: the split comes from the config, which run.py checks against it before fit."""

    def batches(self, stage: str, processes: int) -> int | None:
        """Batches each process gets of the "train", "val" or "test" set (None: unknown before setup).
        The distributed sampler pads to equal shares; training drops the last, partial batch."""
        samples = {"train": self.train_samples, "val": self.val_samples, "test": self.test_samples}[stage]()
        if samples is None:
            return None
        per_process = -(-samples // processes)
        return per_process // self.batch_size if stage == "train" else -(-per_process // self.batch_size)

    def check_enough_for(self, processes: int, processes_key: str = "trainer.devices") -> None:
        """Each process must get at least one full training batch (the last, partial one is
        dropped): else Lightning says "No training batches", trains nothing and exits 0.
        `processes_key`: what sets the number of processes, for the fix (the benchmark's --processes)."""
        samples = self.train_samples()
        if samples is None:
            return
        per_process = -(-samples // processes)  # the distributed sampler pads to equal shares
        if per_process < self.batch_size:
            raise SetupError(
                f"data.batch_size={self.batch_size}: more than the {per_process} training samples that each of the "
                f"{processes} process(es) gets ({samples} in all), so nothing would train. Fix: "
                f"data.batch_size={max(per_process, 1)} or less, fewer processes ({processes_key}), or more data"
            )

    def workers_for(self, dataset: Dataset) -> int:
        # Without a Trainer (the benchmark's plain loop), torchrun says how many processes share the node.
        if self.trainer is not None:
            processes_per_node = self.trainer.num_devices
        else:
            processes_per_node = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        return resolve_workers(self.num_workers, not isinstance(dataset, InMemoryImages), processes_per_node)

    def placed(self, dataset: Dataset, device: torch.device | None = None) -> Dataset:
        """The dataset where its batches are cut: an in-memory set on the GPU (on_device), else as it
        is. `device`: the Trainer's by default."""
        if device is None and self.trainer is not None:
            device = self.trainer.strategy.root_device
        if isinstance(dataset, InMemoryImages) and self.on_device and device is not None and device.type == "cuda":
            return dataset.to(device)  # a no-op once it is there
        return dataset

    def _loader(self, dataset: Dataset, shuffle: bool):
        return make_loader(dataset, self.batch_size, shuffle=shuffle, num_workers=self.workers_for(dataset))

    def train_dataloader(self):
        self.train_set = self.placed(self.train_set)
        loader = self._loader(self.train_set, shuffle=True)
        rank_zero_info(f"Training data: {self._how_loaded(self.train_set, loader.num_workers)}")
        return loader

    def _how_loaded(self, dataset: Dataset, workers: int) -> str:
        # Said once at the start, so that nobody has to wonder about (or "fix") 0 workers.
        if isinstance(dataset, InMemoryImages):
            where = "GPU memory" if dataset.images.is_cuda else "memory"
            if workers:  # asked for (data.num_workers=N), on the CPU
                return f"in {where}, a batch per indexing operation, by {workers} loader worker(s) per process"
            return f"in {where}, a batch per indexing operation: no DataLoader workers (nothing to do for them)"
        return f"read sample by sample by {workers} loader worker(s) per process (data.num_workers={self.num_workers})"

    def val_dataloader(self):
        self.val_set = self.placed(self.val_set)
        return self._loader(self.val_set, shuffle=False)

    def test_dataloader(self):
        self.test_set = self.placed(self.test_set)
        return self._loader(self.test_set, shuffle=False)

    def on_after_batch_transfer(self, batch, dataloader_idx: int):
        images, labels = batch
        images = normalize(images, self.mean, self.std)
        if self.trainer is not None:
            # A "-true" precision (bf16-true, 64-true) trains in its dtype, and Lightning casts a
            # batch's floats to it before this hook, when these images were still integers.
            images = self.trainer.precision_plugin.convert_input(images)
        return images, labels
