"""MNIST is read through the real loading code from small IDX files made here."""

import gzip
import shutil

import numpy as np
import pytest
import torch

from {{ cookiecutter.package_name }}.data.idx import read_idx, write_idx
from {{ cookiecutter.package_name }}.data.mnist import MNISTDataModule, MNISTNotFoundError

from tests.helpers import write_small_mnist


def test_idx_round_trip(tmp_path):
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    for name in ("plain-idx3-ubyte", "zipped-idx3-ubyte.gz"):
        write_idx(tmp_path / name, array)
        assert torch.equal(read_idx(tmp_path / name), torch.from_numpy(array))


def test_datamodule_loads_split_and_normalises(tmp_path):
    root = write_small_mnist(tmp_path, train=100, test=30)
    # torchvision also keeps the .gz files; a gzipped-only copy must load the same.
    raw = root / "MNIST" / "raw"
    for path in list(raw.iterdir()):
        with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()

    data = MNISTDataModule(root=str(root), download=False, batch_size=16, val_size=20)
    data.prepare_data()
    data.setup("fit")
    assert (len(data.train_set), len(data.val_set), len(data.test_set)) == (80, 20, 30)

    images, labels = next(iter(data.train_dataloader()))
    assert images.shape == (16, 1, 28, 28) and images.dtype == torch.uint8
    assert labels.dtype == torch.int64
    images, _ = data.on_after_batch_transfer((images, labels), 0)
    assert images.dtype == torch.float32 and images.abs().max() < 4


def test_missing_files_explain_the_fix(tmp_path):
    data = MNISTDataModule(root=str(tmp_path), download=False)
    with pytest.raises(MNISTNotFoundError, match="login node"):
        data.prepare_data()
    with pytest.raises(MNISTNotFoundError, match=r"python -m .*\.data\.mnist"):
        data.setup("fit")


def test_offline_download_explains_the_fix(tmp_path, monkeypatch):
    import torchvision.datasets

    def no_network(*args, **kwargs):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(torchvision.datasets.MNIST, "download", no_network)
    with pytest.raises(MNISTNotFoundError, match="(?s)Network is unreachable.*no internet"):
        MNISTDataModule(root=str(tmp_path), download=True).prepare_data()
