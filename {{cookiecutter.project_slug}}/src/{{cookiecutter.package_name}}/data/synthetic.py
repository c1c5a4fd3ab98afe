"""MNIST-shaped synthetic data: for smoke runs and benchmarks, needs no download.

Each class has a random prototype image; a sample is its class's prototype blended with
noise. So there is something to learn, and a working run shows the loss fall.
"""

import math

import torch

from .base import ImageDataModule
from .in_memory import InMemoryImages
from .memory import available_memory, check_room

BYTES_WHILE_MADE = 13  # per pixel: the noise, the prototypes per sample and their blend (float32), the uint8 image


class SyntheticDataModule(ImageDataModule):
    def __init__(
        self,
        num_samples: int = 8192,
        image_shape: tuple[int, ...] = (1, 28, 28),
        num_classes: int = 10,
        batch_size: int = 128,
        seed: int = 0,
        num_workers: int | str = "auto",
        on_device: bool = True,
    ):
        super().__init__(batch_size, num_workers, on_device)
        self.num_samples = num_samples
        self.image_shape = tuple(image_shape)
        self.num_classes = num_classes
        self.seed = seed

    def train_samples(self) -> int:
        return self.num_samples

    def val_samples(self) -> int:
        return max(self.num_samples // 8, self.batch_size)

    def test_samples(self) -> int:
        return self.val_samples()

    def split_settings(self) -> dict:
        return {"data.seed": self.seed}  # the classes' prototypes: another seed is another task

    def _make(self, num_samples: int, seed: int) -> InMemoryImages:
        # Same seed on every rank: all ranks see the same dataset, the sampler splits it.
        prototype_generator = torch.Generator().manual_seed(self.seed)
        prototypes = torch.rand((self.num_classes, *self.image_shape), generator=prototype_generator)
        generator = torch.Generator().manual_seed(seed)
        labels = torch.randint(0, self.num_classes, (num_samples,), generator=generator)
        noise = torch.rand((num_samples, *self.image_shape), generator=generator)
        images = (0.5 * prototypes[labels] + 0.5 * noise).mul_(255).to(torch.uint8)
        return InMemoryImages(images, labels)

    def check_enough_for(self, processes: int, processes_key: str = "trainer.devices") -> None:
        """Also: the set fits in memory (each process makes it whole; the sampler splits it)."""
        available = available_memory()  # read once: for the check and for its fix
        fits = (available or 0) // bytes_to_make(1, self.image_shape)
        needed = bytes_to_make(self.num_samples, self.image_shape)
        check_room(needed, f"data.num_samples={self.num_samples}", f"data.num_samples={fits} or fewer", available)
        super().check_enough_for(processes, processes_key)

    def setup(self, stage: str):
        self.train_set = self._make(self.num_samples, self.seed)
        self.val_set = self._make(self.val_samples(), self.seed + 1)
        self.test_set = self._make(self.test_samples(), self.seed + 2)


def bytes_to_make(num_samples: int, image_shape: tuple[int, ...]) -> int:
    return num_samples * math.prod(image_shape) * BYTES_WHILE_MADE
