"""The in-memory loader: whole batches in one indexing operation, with or without workers."""

import torch

from {{ cookiecutter.package_name }}.data.in_memory import InMemoryImages, batch_loader
from {{ cookiecutter.package_name }}.data.synthetic import SyntheticDataModule


def small_set(count: int = 40) -> InMemoryImages:
    images = torch.arange(count, dtype=torch.uint8).view(count, 1, 1, 1).expand(count, 1, 2, 2).clone()
    return InMemoryImages(images, torch.arange(count))


def test_batches_are_cut_by_index():
    batches = list(batch_loader(small_set(), batch_size=16, shuffle=False))
    assert [len(labels) for _, labels in batches] == [16, 16, 8]  # evaluation keeps the last one
    images, labels = batches[1]
    assert images.shape == (16, 1, 2, 2) and images.dtype == torch.uint8
    assert torch.equal(labels, torch.arange(16, 32)) and torch.equal(images[:, 0, 0, 0].long(), labels)


def test_training_batches_are_shuffled_and_full():
    torch.manual_seed(0)
    batches = list(batch_loader(small_set(), batch_size=16, shuffle=True))
    assert [len(labels) for _, labels in batches] == [16, 16]  # drop_last: every step the same size
    seen = torch.cat([labels for _, labels in batches])
    assert len(seen.unique()) == 32 and not torch.equal(seen, torch.arange(32))


def test_workers_give_the_same_batches():
    without = list(batch_loader(small_set(), batch_size=16, shuffle=False))
    loader = batch_loader(small_set(), batch_size=16, shuffle=False, num_workers=1)
    assert loader.persistent_workers
    for (images, labels), (expected_images, expected_labels) in zip(loader, without, strict=True):
        assert torch.equal(images, expected_images) and torch.equal(labels, expected_labels)


def test_data_stays_on_the_cpu_without_a_gpu():
    datamodule = SyntheticDataModule(num_samples=64, batch_size=16, on_device=True)
    datamodule.setup("fit")
    images, _ = next(iter(datamodule.train_dataloader()))  # no trainer: nothing to move to
    assert images.device.type == "cpu"
