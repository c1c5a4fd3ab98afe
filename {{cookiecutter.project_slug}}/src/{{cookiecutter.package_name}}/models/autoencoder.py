"""The fully connected autoencoder of the Tampere DDP tutorial: reconstruct the image."""

import pytorch_lightning as pl
import torch
from torch import nn

from .optimizers import adamw
from .sharding import shard_layers
from .step_logging import logger_writes_this_step


class DenseAutoEncoder(nn.Sequential):
    def __init__(self, input_size: int = 28 * 28, hidden: int = 128):
        super().__init__(
            nn.Flatten(),
            nn.Linear(input_size, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),  # the bottleneck
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, input_size),
        )


class AutoEncoder(pl.LightningModule):
    def __init__(self, net: nn.Module, lr: float = 1e-3, weight_decay: float = 0.0):
        super().__init__()
        self.save_hyperparameters(ignore=["net"])
        self.net = net

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images).view_as(images)

    def _loss(self, batch):
        images, _labels = batch
        return nn.functional.mse_loss(self(images), images)

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        if logger_writes_this_step(self.trainer, batch_idx):  # self.log is costly: only when written
            self.log("train/loss", loss)  # no prog_bar=True: that reads it (.item()) after every step
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self._loss(batch), sync_dist=True, prog_bar=True)

    def test_step(self, batch, batch_idx):
        self.log("test/loss", self._loss(batch), sync_dist=True, prog_bar=True)

    def configure_model(self):
        shard_layers(self, self.net)  # strategy=fsdp2 only

    def configure_optimizers(self):
        return adamw(self, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
