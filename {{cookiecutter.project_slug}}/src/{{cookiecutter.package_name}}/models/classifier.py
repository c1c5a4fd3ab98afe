"""Image classification: cross-entropy training, accuracy on validation and test."""

import pytorch_lightning as pl
import torch
import torchmetrics
from torch import nn

from .optimizers import adamw
from .sharding import shard_layers
from .step_logging import logger_writes_this_step


class ImageClassifier(pl.LightningModule):
    def __init__(self, net: nn.Module, num_classes: int = 10, lr: float = 1e-3, weight_decay: float = 0.0):
        super().__init__()
        self.save_hyperparameters(ignore=["net"])
        self.net = net
        self.val_accuracy = torchmetrics.Accuracy(task="multiclass", num_classes=num_classes)
        self.test_accuracy = torchmetrics.Accuracy(task="multiclass", num_classes=num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loss = nn.functional.cross_entropy(self(images), labels)
        if logger_writes_this_step(self.trainer, batch_idx):  # self.log is costly: only when written
            self.log("train/loss", loss)  # no prog_bar=True: that reads it (.item()) after every step
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

    def configure_model(self):
        shard_layers(self, self.net)  # strategy=fsdp2 only

    def configure_optimizers(self):
        return adamw(self, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
