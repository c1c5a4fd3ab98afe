"""The small convolutional network of PyTorch's MNIST example, with BatchNorm.

BatchNorm makes `trainer.sync_batchnorm=true` meaningful: with it, statistics are
computed over the global batch instead of each rank's slice.
"""

from torch import nn


class MnistCNN(nn.Sequential):
    def __init__(self, num_classes: int = 10, channels: int = 32, hidden: int = 128, dropout: float = 0.25):
        super().__init__(
            nn.Conv2d(1, channels, 3),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3),
            nn.BatchNorm2d(2 * channels),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(dropout),
            nn.Flatten(),
            nn.Linear(2 * channels * 12 * 12, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, num_classes),
        )
