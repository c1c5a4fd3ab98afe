"""The loaders: in memory, whole batches in one indexing operation, with or without workers;
and how many workers `data.num_workers=auto` gives each process."""

import pytest
import torch
from lightning_fabric.utilities.data import _replace_dunder_methods
from pytorch_lightning.utilities.data import _update_dataloader
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

from {{ cookiecutter.package_name }}.data import workers
from {{ cookiecutter.package_name }}.data.in_memory import IndexBatches, InMemoryImages, normalize
from {{ cookiecutter.package_name }}.data.loaders import make_loader
from {{ cookiecutter.package_name }}.data.synthetic import SyntheticDataModule

from tests.helpers import needs_cuda


def small_set(count: int = 40) -> InMemoryImages:
    images = torch.arange(count, dtype=torch.uint8).view(count, 1, 1, 1).expand(count, 1, 2, 2).clone()
    return InMemoryImages(images, torch.arange(count))


def test_batches_are_cut_by_index():
    batches = list(make_loader(small_set(), batch_size=16, shuffle=False))
    assert [len(labels) for _, labels in batches] == [16, 16, 8]  # evaluation keeps the last one
    images, labels = batches[1]
    assert images.shape == (16, 1, 2, 2) and images.dtype == torch.uint8
    assert torch.equal(labels, torch.arange(16, 32)) and torch.equal(images[:, 0, 0, 0].long(), labels)


def test_training_batches_are_shuffled_and_full():
    torch.manual_seed(0)
    batches = list(make_loader(small_set(), batch_size=16, shuffle=True))
    assert [len(labels) for _, labels in batches] == [16, 16]  # drop_last: every step the same size
    seen = torch.cat([labels for _, labels in batches])
    assert len(seen.unique()) == 32 and not torch.equal(seen, torch.arange(32))


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("batches_per_copy", [32, 2])  # all the epoch's batches in one copy, or several
def test_batches_are_those_of_torchs_batch_sampler(shuffle, batches_per_copy, monkeypatch):
    """IndexBatches cuts a few batches' indices at a time: the same batches as torch's BatchSampler
    over the same sampler (Lightning's DistributedSampler, put in its place, included)."""
    monkeypatch.setattr(IndexBatches, "batches_per_copy", batches_per_copy)
    dataset = small_set(40)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=1, shuffle=shuffle, seed=3)
    for drop_last in (False, True):
        expected = [torch.tensor(batch) for batch in BatchSampler(sampler, 6, drop_last)]
        batches = list(IndexBatches(sampler, 6, drop_last))
        assert len(batches) == len(expected) == len(IndexBatches(sampler, 6, drop_last))
        assert all(torch.equal(batch, want) for batch, want in zip(batches, expected, strict=True))


def test_lightning_puts_its_distributed_sampler_into_the_batches():
    """What Lightning does to a loader when several processes train (its own functions)."""
    with _replace_dunder_methods(DataLoader, "dataset"), _replace_dunder_methods(BatchSampler):
        loader = make_loader(small_set(40), batch_size=8, shuffle=True)
    seen = []
    for rank in (0, 1):
        sampler = DistributedSampler(loader.dataset, num_replicas=2, rank=rank, seed=0)
        sharded = _update_dataloader(loader, sampler)
        assert isinstance(sharded.batch_sampler, IndexBatches) and sharded.batch_sampler.sampler is sampler
        seen.append(torch.cat([labels for _, labels in sharded]))
    assert [len(labels) for labels in seen] == [16, 16]  # 20 each, in full batches of 8
    assert not set(seen[0].tolist()) & set(seen[1].tolist())


def test_workers_give_the_same_batches():
    without = list(make_loader(small_set(), batch_size=16, shuffle=False))
    loader = make_loader(small_set(), batch_size=16, shuffle=False, num_workers=1)
    assert loader.persistent_workers
    for (images, labels), (expected_images, expected_labels) in zip(loader, without, strict=True):
        assert torch.equal(images, expected_images) and torch.equal(labels, expected_labels)


def test_normalize_gives_float32_scaled_and_shifted():
    images = torch.tensor([0, 51, 255], dtype=torch.uint8)
    for given in (images, images.double()):  # uint8 in one pass; anything else as float32
        normalized = normalize(given, mean=0.5, std=0.25)
        assert normalized.dtype == torch.float32
        assert torch.allclose(normalized, (images.float() / 255 - 0.5) / 0.25)


def test_data_stays_on_the_cpu_without_a_gpu():
    datamodule = SyntheticDataModule(num_samples=64, batch_size=16, on_device=True)
    datamodule.setup("fit")
    images, _ = next(iter(datamodule.train_dataloader()))  # no trainer: nothing to move to
    assert images.device.type == "cpu"


@needs_cuda
def test_batches_on_the_gpu_are_cut_without_waiting_for_it():
    """A copy of the batch's indices that synchronised would stop the host from queuing the
    next steps while the GPU works: every step (torch raises on any synchronisation here)."""
    dataset = small_set().to("cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        images, labels = dataset.__getitems__([3, 1, 4, 1, 5])
        batches = list(make_loader(dataset, batch_size=16, shuffle=True))  # indices copied once per 32 batches
        normalized = normalize(images, mean=0.5, std=0.25)  # the shift a CPU number, the images on the GPU
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert labels.is_cuda and labels.tolist() == [3, 1, 4, 1, 5]
    assert images[:, 0, 0, 0].tolist() == [3, 1, 4, 1, 5]
    assert [len(labels) for _, labels in batches] == [16, 16] and all(labels.is_cuda for _, labels in batches)
    assert normalized.is_cuda and torch.allclose(normalized.cpu(), normalize(images.cpu(), mean=0.5, std=0.25))


@pytest.fixture
def no_launcher(monkeypatch):
    for name in ("SLURM_CPUS_PER_TASK", "TORCHELASTIC_RUN_ID", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    return monkeypatch


def test_auto_workers_in_memory_are_none(no_launcher):
    no_launcher.setenv("SLURM_CPUS_PER_TASK", "10")
    assert workers.resolve_workers("auto", per_sample=False) == 0


def test_auto_workers_follow_slurms_cpus_per_task(no_launcher):
    no_launcher.setenv("SLURM_CPUS_PER_TASK", "10")  # srun: a task per GPU, --cpus-per-task from the profile
    assert workers.resolve_workers("auto", per_sample=True, processes_per_node=4) == 9
    no_launcher.setenv("SLURM_CPUS_PER_TASK", "40")  # torchrun: one task per node, 4 processes share it
    no_launcher.setenv("TORCHELASTIC_RUN_ID", "1")
    no_launcher.setenv("LOCAL_WORLD_SIZE", "4")
    assert workers.resolve_workers("auto", per_sample=True, processes_per_node=4) == 9


def test_auto_workers_outside_slurm_share_the_machine(no_launcher):
    assert workers.resolve_workers("auto", per_sample=True, processes_per_node=2) == 7  # 16 CPUs / 2 - 1
    assert workers.resolve_workers("auto", per_sample=True, processes_per_node=32) == 0
    assert workers.resolve_workers(3, per_sample=True) == 3  # a number is taken as it is


def test_the_rendered_scripts_cpus_reach_the_workers(no_launcher):
    """What a task of scripts/run-gpu4.sh on Puhti sees: --cpus-per-task=10 (cluster.slurm.cpus_per_gpu)."""
    from {{ cookiecutter.package_name }}.slurm.profiles import load
    from {{ cookiecutter.package_name }}.slurm.render import Job, sbatch_header

    header = sbatch_header(Job(load("cluster", "puhti"), "ddp"))
    (cpus,) = [line.split("=")[1] for line in header if line.startswith("#SBATCH --cpus-per-task=")]
    no_launcher.setenv("SLURM_CPUS_PER_TASK", cpus)
    assert workers.resolve_workers("auto", per_sample=True, processes_per_node=4) == int(cpus) - 1 == 9


@pytest.mark.parametrize(("num_workers", "said"), [("auto", "no DataLoader workers"), (2, "by 2 loader worker(s)")])
def test_the_start_says_how_in_memory_data_is_loaded(num_workers, said, monkeypatch):
    """It said "no DataLoader workers" also where data.num_workers=2 had started two."""
    from {{ cookiecutter.package_name }}.data import base

    lines = []
    monkeypatch.setattr(base, "rank_zero_info", lines.append)
    data = SyntheticDataModule(num_samples=64, batch_size=8, num_workers=num_workers)
    data.setup("fit")
    loader = data.train_dataloader()
    assert loader.num_workers == (2 if num_workers == 2 else 0)
    (line,) = lines
    assert line.startswith("Training data: in memory, a batch per indexing operation") and said in line, line
