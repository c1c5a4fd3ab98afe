"""Test-only: a LightningModule written the ordinary Lightning way, with no knowledge of
strategies or of this project: its own torch optimizer, `self.log` on every step, no
`configure_model`. tests/test_plain_model.py trains it under every strategy."""

import pytorch_lightning as pl
import torch
from torch import nn


class PlainModel(pl.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 1e-2):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loss = nn.functional.cross_entropy(self.net(images), labels)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        images, labels = batch
        self.log("val/loss", nn.functional.cross_entropy(self.net(images), labels), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
