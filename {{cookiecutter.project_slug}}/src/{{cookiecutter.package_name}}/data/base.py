"""Shared plumbing of the in-memory DataModules: loaders and per-batch normalisation."""

import pytorch_lightning as pl

from .in_memory import InMemoryImages, batch_loader, normalize


class InMemoryDataModule(pl.LightningDataModule):
    """Subclasses fill `train_set`, `val_set` and `test_set` in `setup`.

    on_device: on a GPU, hold each set there (one copy per process) and cut batches there:
    no copies from the host per step. num_workers: DataLoader worker processes per rank,
    used only for data on the host.
    """

    mean = 0.5
    std = 0.5

    def __init__(self, batch_size: int, num_workers: int = 0, on_device: bool = True):
        super().__init__()
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.on_device = on_device
        self.train_set: InMemoryImages | None = None
        self.val_set: InMemoryImages | None = None
        self.test_set: InMemoryImages | None = None

    def _placed(self, dataset: InMemoryImages) -> InMemoryImages:
        device = self.trainer.strategy.root_device if self.trainer is not None else None
        if self.on_device and device is not None and device.type == "cuda":
            return dataset.to(device)  # a no-op once it is there
        return dataset

    def _loader(self, dataset: InMemoryImages, shuffle: bool):
        return batch_loader(dataset, self.batch_size, shuffle=shuffle, num_workers=self.num_workers)

    def train_dataloader(self):
        self.train_set = self._placed(self.train_set)
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self):
        self.val_set = self._placed(self.val_set)
        return self._loader(self.val_set, shuffle=False)

    def test_dataloader(self):
        self.test_set = self._placed(self.test_set)
        return self._loader(self.test_set, shuffle=False)

    def on_after_batch_transfer(self, batch, dataloader_idx: int):
        images, labels = batch
        return normalize(images, self.mean, self.std), labels
