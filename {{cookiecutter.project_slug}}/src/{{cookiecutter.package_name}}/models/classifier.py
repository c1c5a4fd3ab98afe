"""Image classification: cross-entropy training, accuracy on validation and test."""

from collections.abc import Callable

import pytorch_lightning as pl
import torch
import torchmetrics
from torch import nn


class ImageClassifier(pl.LightningModule):
    def __init__(
        self, net: nn.Module, num_classes: int = 10, optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.AdamW
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["net", "optimizer"])  # checkpoints keep plain values only
        self.net = net
        self.optimizer = optimizer  # built from the parameters; configs/model/*.yaml `optimizer:`
        self.val_accuracy = torchmetrics.Accuracy(task="multiclass", num_classes=num_classes)
        self.test_accuracy = torchmetrics.Accuracy(task="multiclass", num_classes=num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loss = nn.functional.cross_entropy(self(images), labels)
        self.log("train/loss", loss)  # no prog_bar=True: the bar would read it (.item()) after every step
        return loss

    def _evaluate(self, batch, stage: str, accuracy: torchmetrics.Metric):
        images, labels = batch
        logits = self(images)
        accuracy(logits, labels)
        self.log(f"{stage}/loss", nn.functional.cross_entropy(logits, labels), sync_dist=True, prog_bar=True)
        self.log(f"{stage}/acc", accuracy, prog_bar=True)

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, "val", self.val_accuracy)

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, "test", self.test_accuracy)

    def configure_optimizers(self):
        return self.optimizer(self.parameters())
