"""The small convolutional network of PyTorch's MNIST example, with BatchNorm.

BatchNorm makes `trainer.sync_batchnorm=true` meaningful: with it, statistics are
computed over the global batch instead of each rank's slice.
"""

from collections.abc import Sequence

from torch import nn

MNIST_IMAGE = (1, 28, 28)  # channels, height, width


class MnistCNN(nn.Sequential):
    def __init__(
        self,
        num_classes: int = 10,
        channels: int = 32,
        hidden: int = 128,
        dropout: float = 0.25,
        image_shape: Sequence[int] | None = None,
    ):
        in_channels, height, width = image_shape or MNIST_IMAGE
        pooled = ((height - 4) // 2) * ((width - 4) // 2)  # two 3x3 convolutions shrink each side by 4, pooling halves
        super().__init__(
            nn.Conv2d(in_channels, channels, 3),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3),
            nn.BatchNorm2d(2 * channels),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(dropout),
            nn.Flatten(),
            nn.Linear(2 * channels * pooled, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, num_classes),
        )
