"""The fully connected autoencoder of the Tampere DDP tutorial: reconstruct the image."""

import math
from collections.abc import Callable, Sequence

import pytorch_lightning as pl
import torch
from torch import nn

from .cnn import MNIST_IMAGE


class DenseAutoEncoder(nn.Sequential):
    def __init__(self, image_shape: Sequence[int] | None = None, hidden: int = 128):
        input_size = math.prod(image_shape or MNIST_IMAGE)
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
    def __init__(self, net: nn.Module, optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.AdamW):
        super().__init__()
        self.net = net
        self.optimizer = optimizer  # built from the parameters; configs/model/*.yaml `optimizer:`

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images).view_as(images)

    def _loss(self, batch):
        images, _labels = batch
        return nn.functional.mse_loss(self(images), images)

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log("train/loss", loss)  # no prog_bar=True: the bar would read it (.item()) after every step
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self._loss(batch), sync_dist=True, prog_bar=True)

    def test_step(self, batch, batch_idx):
        self.log("test/loss", self._loss(batch), sync_dist=True, prog_bar=True)

    def configure_optimizers(self):
        return self.optimizer(self.parameters())
