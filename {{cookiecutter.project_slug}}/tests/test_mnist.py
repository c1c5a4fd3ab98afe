"""MNIST is read through the real loading code from small IDX files made here."""

import gzip
import shutil

import numpy as np
import pytest
import torch

from {{ cookiecutter.package_name }}.data.idx import read_idx, write_idx
from {{ cookiecutter.package_name }}.data.mnist import MNISTDataModule, MNISTNotFoundError
from {{ cookiecutter.package_name }}.data.per_sample import IdxSamples

from tests.helpers import run_train, write_small_mnist


def test_idx_round_trip(tmp_path):
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    for name in ("plain-idx3-ubyte", "zipped-idx3-ubyte.gz"):
        write_idx(tmp_path / name, array)
        assert torch.equal(read_idx(tmp_path / name), torch.from_numpy(array))


def test_datamodule_loads_split_and_normalises(tmp_path):
    root = gzip_only(write_small_mnist(tmp_path, train=100, test=30))
    data = MNISTDataModule(root=str(root), download=False, batch_size=16, val_size=20)
    data.prepare_data()
    data.setup("fit")
    assert (len(data.train_set), len(data.val_set), len(data.test_set)) == (80, 20, 30)

    images, labels = next(iter(data.train_dataloader()))
    assert images.shape == (16, 1, 28, 28) and images.dtype == torch.uint8
    assert labels.dtype == torch.int64
    images, _ = data.on_after_batch_transfer((images, labels), 0)
    assert images.dtype == torch.float32 and images.abs().max() < 4


def gzip_only(root):
    """torchvision also keeps the .gz files; a gzipped-only copy must load the same."""
    raw = root / "MNIST" / "raw"
    for path in list(raw.iterdir()):
        with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
    return root


def batches(loader) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = zip(*loader, strict=True)
    return torch.cat(images), torch.cat(labels)


def test_reading_sample_by_sample_gives_the_same_data(tmp_path):
    root = gzip_only(write_small_mnist(tmp_path, train=100, test=30))
    in_memory = MNISTDataModule(root=str(root), download=False, batch_size=16, val_size=20)
    from_files = MNISTDataModule(root=str(root), download=False, batch_size=16, val_size=20, in_memory=False)
    for data in (in_memory, from_files):
        data.prepare_data()  # unpacks the .gz files for reading from them
        data.setup("fit")
    assert isinstance(from_files.train_set, IdxSamples)
    assert from_files.workers_for(from_files.train_set) >= 0 and in_memory.workers_for(in_memory.train_set) == 0
    for split in ("val", "test"):
        expected = batches(getattr(in_memory, f"{split}_dataloader")())
        from_files.num_workers = 1  # and through a worker process
        got = batches(getattr(from_files, f"{split}_dataloader")())
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True)), f"{split} differs"
        assert got[0].dtype == torch.uint8 and got[1].dtype == torch.int64
    assert len(from_files.train_set) == 80


def test_trains_from_the_files_with_auto_workers(tmp_path):
    root = write_small_mnist(tmp_path / "mnist")
    overrides = ["data=mnist", f"data.root={root}", "data.download=false", "data.val_size=64", "data.in_memory=false"]
    result = run_train(
        *overrides, "data.batch_size=16", "trainer.fast_dev_run=true", "logger=csv", f"output_root={tmp_path}"
    )
    assert "fast_dev_run" in result.stdout + result.stderr


def test_missing_files_explain_the_fix(tmp_path):
    data = MNISTDataModule(root=str(tmp_path), download=False)
    with pytest.raises(MNISTNotFoundError, match="login node"):
        data.prepare_data()
    with pytest.raises(MNISTNotFoundError, match=r"python -m .*\.data\.mnist"):
        data.setup("fit")


@pytest.mark.parametrize("in_memory", [True, False])
@pytest.mark.parametrize(
    ("name", "spoil", "said"),
    [
        ("train-images-idx3-ubyte", lambda data: data[: len(data) // 2], "bytes of data where its header says"),
        ("t10k-labels-idx1-ubyte", lambda data: b"<html>not found</html>", "is not a uint8 IDX file"),
        ("train-labels-idx1-ubyte", lambda data: b"", "is not a uint8 IDX file (0 bytes"),
    ],
    ids=["cut-short", "not-idx", "empty"],
)
def test_files_that_are_not_whole_idx_files_explain_the_fix(tmp_path, in_memory, name, spoil, said):
    """A download or copy cut short: a traceback (cannot reshape, struct.error, not a uint8 IDX file)."""
    root = write_small_mnist(tmp_path)
    path = root / "MNIST" / "raw" / name
    path.write_bytes(spoil(path.read_bytes()))
    data = MNISTDataModule(root=str(root), val_size=16, in_memory=in_memory)
    with pytest.raises(MNISTNotFoundError) as error:
        data.check_enough_for(1)
        data.setup("fit")
    assert said in str(error.value) and str(path) in str(error.value), error.value
    assert f"Fix: delete {root}/MNIST/raw and download MNIST again: python -m " in str(error.value)


def test_offline_download_explains_the_fix_and_leaves_no_empty_folders(tmp_path, monkeypatch):
    """train.py's download left an empty data/MNIST/raw behind (the download command did not)."""
    import os

    import torchvision.datasets

    def no_network(self):
        os.makedirs(self.raw_folder, exist_ok=True)  # as torchvision's download does first
        raise OSError("Network is unreachable")

    monkeypatch.setattr(torchvision.datasets.MNIST, "download", no_network)
    root = tmp_path / "my data"
    with pytest.raises(MNISTNotFoundError, match="(?s)Network is unreachable.*no internet") as error:
        MNISTDataModule(root=str(root), download=True).prepare_data()
    assert not root.exists()
    assert f"run `python -m {MNISTDataModule.__module__} '{root}'`" in str(error.value)  # a command to paste


def test_the_download_command_names_a_file_that_is_there_but_not_whole(tmp_path, capsys):
    """torchvision took the files there as downloaded and failed to read them: the command said the
    download failed (AssertionError) and to find internet."""
    from {{ cookiecutter.package_name }}.data.mnist import main

    root = write_small_mnist(tmp_path)
    path = root / "MNIST" / "raw" / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:1000])  # a copy cut short
    assert main([str(root)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ERROR: {path} holds 984 bytes of data where its header says")
    assert line.endswith(f"Fix: delete {root}/MNIST/raw, then run this command again")
    path.unlink()
    gz = path.with_name(f"{path.name}.gz")
    gz.write_bytes(b"\x1f\x8b")  # a .gz cut short: torchvision fetches it again (its checksum), not refused here
    from {{ cookiecutter.package_name }}.data.mnist import _not_whole

    assert _not_whole(root) is None


@pytest.mark.parametrize("inside", ["MNIST", "MNIST/raw"])
def test_a_root_inside_the_layout_names_the_root_meant(tmp_path, inside):
    """DATA_DIR set to the folder of the files: the training downloaded a second copy into
    <it>/MNIST/raw (or said that the node has no internet)."""
    root = write_small_mnist(tmp_path)
    with pytest.raises(MNISTNotFoundError) as error:
        MNISTDataModule(root=str(root / inside), download=True).prepare_data()
    assert str(error.value).endswith(f"not a folder inside it. Fix: data.root={root} (or DATA_DIR={root})")
    assert not (root / inside / "MNIST").exists()
