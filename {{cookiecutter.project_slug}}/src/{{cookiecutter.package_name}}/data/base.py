"""Shared plumbing of the in-memory DataModules: loaders and per-batch normalisation."""

import pytorch_lightning as pl

from .in_memory import InMemoryImages, batch_loader, normalize


class InMemoryDataModule(pl.LightningDataModule):
    """Subclasses fill `train_set`, `val_set` and `test_set` in `setup`."""

    mean = 0.5
    std = 0.5

    def __init__(self, batch_size: int):
        super().__init__()
        self.batch_size = batch_size
        self.train_set: InMemoryImages | None = None
        self.val_set: InMemoryImages | None = None
        self.test_set: InMemoryImages | None = None

    def train_dataloader(self):
        return batch_loader(self.train_set, self.batch_size, shuffle=True)

    def val_dataloader(self):
        return batch_loader(self.val_set, self.batch_size, shuffle=False)

    def test_dataloader(self):
        return batch_loader(self.test_set, self.batch_size, shuffle=False)

    def on_after_batch_transfer(self, batch, dataloader_idx: int):
        images, labels = batch
        return normalize(images, self.mean, self.std), labels
