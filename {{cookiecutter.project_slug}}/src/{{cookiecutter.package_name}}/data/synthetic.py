"""Random MNIST-shaped data: for smoke runs and benchmarks, needs no download."""

import torch

from .base import InMemoryDataModule
from .in_memory import InMemoryImages


class SyntheticDataModule(InMemoryDataModule):
    def __init__(
        self,
        num_samples: int = 8192,
        image_shape: tuple[int, ...] = (1, 28, 28),
        num_classes: int = 10,
        batch_size: int = 128,
        seed: int = 0,
        num_workers: int = 0,
        on_device: bool = True,
    ):
        super().__init__(batch_size, num_workers, on_device)
        self.num_samples = num_samples
        self.image_shape = tuple(image_shape)
        self.num_classes = num_classes
        self.seed = seed

    def _make(self, num_samples: int, seed: int) -> InMemoryImages:
        # Same seed on every rank: all ranks see the same dataset, the sampler splits it.
        generator = torch.Generator().manual_seed(seed)
        images = torch.randint(0, 256, (num_samples, *self.image_shape), dtype=torch.uint8, generator=generator)
        labels = torch.randint(0, self.num_classes, (num_samples,), generator=generator)
        return InMemoryImages(images, labels)

    def setup(self, stage: str):
        eval_samples = max(self.num_samples // 8, self.batch_size)
        self.train_set = self._make(self.num_samples, self.seed)
        self.val_set = self._make(eval_samples, self.seed + 1)
        self.test_set = self._make(eval_samples, self.seed + 2)
