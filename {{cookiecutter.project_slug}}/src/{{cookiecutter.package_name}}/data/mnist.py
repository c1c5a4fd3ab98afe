"""MNIST: downloaded once (global rank 0), then read from IDX files into memory, or with
data.in_memory=false sample by sample from the files by DataLoader workers (the way to
train on data larger than memory; see per_sample.py).

Run `python -m {{ cookiecutter.package_name }}.data.mnist DIR` on a machine with internet
(a login node) when the compute nodes have none.
"""

import gzip
import shlex
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

from ..launch.errors import OneLineParser, SetupError
from .base import ImageDataModule
from .idx import NotAnIdxFile, count_idx, read_idx
from .in_memory import InMemoryImages
from .per_sample import IdxSamples

# torchvision's layout: ROOT/MNIST/raw/<name>, extracted or gzipped.
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class MNISTNotFoundError(SetupError):
    """train.py prints it as one line: where the files should be and how to get them."""


def raw_dir(root: str | Path) -> Path:
    return Path(root).expanduser() / "MNIST" / "raw"


def _find(root: str | Path, name: str) -> Path | None:
    for candidate in (raw_dir(root) / name, raw_dir(root) / f"{name}.gz"):
        if candidate.exists():
            return candidate
    return None


def is_present(root: str | Path) -> bool:
    return all(_find(root, name) for pair in FILES.values() for name in pair)


def _root_around(root: str | Path) -> Path | None:
    """The data.root meant where root is the MNIST or raw folder of a root that holds the files."""
    root = Path(root).expanduser()
    if is_present(root):
        return None
    for meant in root.parents[:2]:
        if root in (meant / "MNIST", raw_dir(meant)) and is_present(meant):
            return meant
    return None


def _how_to_fix(root: str | Path) -> str:
    # __package__, not __name__: that is "__main__" when this file runs as the download command.
    return (
        "Fix: compute nodes often have no internet: on a login node run "
        f"`python -m {__package__}.mnist {shlex.quote(str(root))}`, then train with data.root pointing there "
        "(or set DATA_DIR)"
    )


def download(root: str | Path) -> None:
    """Fetch MNIST with torchvision (checksummed mirrors); explain what to do when offline."""
    from torchvision.datasets import MNIST  # only needed for the download

    made = [path for path in (raw_dir(root), raw_dir(root).parent, Path(root).expanduser()) if not path.exists()]
    try:
        for train in (True, False):
            MNIST(str(Path(root).expanduser()), train=train, download=True)
    except Exception as error:  # URLError, socket timeouts, HTTP errors, ...
        for path in made:  # the empty folders of a failed download (torchvision makes them first)
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        raise MNISTNotFoundError(
            f"data.root={root}: MNIST is not under {raw_dir(root)} and downloading it failed ({_reason(error)}). "
            + _how_to_fix(root)
        ) from error


def _reason(error: Exception) -> str:
    return str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__


def _split_files(root: str | Path, split: str) -> list[Path]:
    paths = [_find(root, name) for name in FILES[split]]
    if None in paths:
        raise MNISTNotFoundError(
            f"data.root={root}: MNIST {split} files are missing from {raw_dir(root)}. {_how_to_fix(root)}"
        )
    return paths


@contextmanager
def whole_files(root: str | Path):
    """A file that is not a whole IDX file (a download cut short): one line, and how to get it again."""
    try:
        yield
    except NotAnIdxFile as error:
        raise MNISTNotFoundError(
            f"data.root={root}: {error}. Fix: delete {raw_dir(root)} and download MNIST again: "
            f"python -m {__package__}.mnist {root} (or copy the whole files there)"
        ) from error


def load_split(root: str | Path, split: str) -> InMemoryImages:
    with whole_files(root):
        images, labels = (read_idx(path) for path in _split_files(root, split))
    return InMemoryImages(images.unsqueeze(1), labels.long())  # [N, 28, 28] -> [N, 1, 28, 28]


def decompress(root: str | Path) -> None:
    """Reading samples from the files needs them uncompressed: unzip the .gz files that lack a copy."""
    for pair in FILES.values():
        for name in pair:
            path = raw_dir(root) / name
            if not path.exists() and path.with_name(f"{name}.gz").exists():
                with gzip.open(path.with_name(f"{name}.gz"), "rb") as src, open(path, "wb") as dst:
                    shutil.copyfileobj(src, dst)


def sample_split(root: str | Path, split: str, indices: torch.Tensor | None = None) -> IdxSamples:
    images, labels = (path.with_suffix("") if path.suffix == ".gz" else path for path in _split_files(root, split))
    with whole_files(root):
        return IdxSamples(images, labels, indices)


class MNISTDataModule(ImageDataModule):
    num_classes = 10  # the digits; the model's num_classes follows it (configs/model/cnn.yaml)
    image_shape = (1, 28, 28)  # channels, height, width: the models' default (models/cnn.py, MNIST_IMAGE)
    mean = 0.1307
    std = 0.3081

    def __init__(
        self,
        root: str = "data",
        download: bool = True,
        batch_size: int = 128,
        val_size: int = 5000,
        seed: int = 0,
        num_workers: int | str = "auto",
        on_device: bool = True,
        in_memory: bool = True,
    ):
        super().__init__(batch_size, num_workers, on_device)
        self.root = root
        self.in_memory = in_memory
        self.download = download
        self.val_size = val_size
        self.seed = seed
        # One download for the whole job: cluster file systems are shared between nodes.
        self.prepare_data_per_node = False

    def prepare_data(self):
        meant = _root_around(self.root)
        if meant is not None:  # else a download into ROOT/MNIST/raw/MNIST/raw, or "no internet"
            raise MNISTNotFoundError(
                f"data.root={self.root}: the folder that holds MNIST/raw, not a folder inside it. "
                f"Fix: data.root={meant} (or DATA_DIR={meant})"
            )
        if not is_present(self.root):
            if not self.download:
                raise MNISTNotFoundError(
                    f"data.root={self.root}: MNIST is not under {raw_dir(self.root)} and data.download=false. "
                    + _how_to_fix(self.root)
                )
            download(self.root)
        if not self.in_memory:
            decompress(self.root)

    def train_samples(self) -> int:
        labels = _find(self.root, FILES["train"][1])
        with whole_files(self.root):
            return (count_idx(labels) if labels else 60000) - self.val_size  # not there yet: the download's

    def val_samples(self) -> int:
        return self.val_size

    def split_settings(self) -> dict:
        return {"data.seed": self.seed, "data.val_size": self.val_size}  # _split's permutation and cut

    def test_samples(self) -> int:
        labels = _find(self.root, FILES["test"][1])
        with whole_files(self.root):
            return count_idx(labels) if labels else 10000

    def check_enough_for(self, processes: int, processes_key: str = "trainer.devices") -> None:
        total = self.train_samples() + self.val_size
        if self.val_size >= total:
            raise SetupError(
                f"data.val_size={self.val_size}: holds out all {total} training images. "
                f"Fix: data.val_size={total // 10} (a tenth), or less"
            )
        super().check_enough_for(processes, processes_key)

    def setup(self, stage: str):
        if self.in_memory:
            full = load_split(self.root, "train")
            val, train = self._split(len(full))
            self.train_set = InMemoryImages(full.images[train], full.labels[train])
            self.val_set = InMemoryImages(full.images[val], full.labels[val])
            self.test_set = load_split(self.root, "test")
        else:
            full = sample_split(self.root, "train")
            val, train = self._split(len(full))
            self.train_set, self.val_set = IdxSamples(*full.paths, train), IdxSamples(*full.paths, val)
            self.test_set = sample_split(self.root, "test")

    def _split(self, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Validation and training indices: the same seeded permutation on every rank, so all agree."""
        order = torch.randperm(count, generator=torch.Generator().manual_seed(self.seed))
        return order[: self.val_size], order[self.val_size :]


def _not_whole(root: str | Path) -> str | None:
    """Why the first unpacked MNIST file under root that is not a whole IDX file is not; None if
    none. Only those: torchvision takes them as downloaded (a .gz cut short it fetches again)."""
    for path in (raw_dir(root) / name for pair in FILES.values() for name in pair):
        if not path.is_file():
            continue
        try:
            read_idx(path)
        except NotAnIdxFile as error:
            return str(error)
    return None


def main(argv: list[str] | None = None) -> int:
    """The download command, for a machine with internet (the training error names it)."""
    from ..launch.paths import unwritable

    parser = OneLineParser(
        prog=f"python -m {__package__}.mnist",
        description="Download MNIST into DIR/MNIST/raw, for `python train.py data.root=DIR`.",
    )
    parser.add_argument("root", nargs="?", default="data", metavar="DIR", help="the folder (default: data)")
    target = parser.parse_args(argv).root
    problem = "is empty" if not target.strip() else unwritable(Path(target) / "MNIST" / "raw", folder=True)
    if problem:  # before: blamed on the internet, after making folders
        print(f"ERROR: DIR={target!r} {problem}. Fix: a folder of yours, e.g. data", file=sys.stderr)
        return 2
    broken = _not_whole(target)
    if broken:  # torchvision takes files that are there as downloaded: it would fail to read them, blamed on the net
        print(f"ERROR: {broken}. Fix: delete {raw_dir(target)}, then run this command again", file=sys.stderr)
        return 2
    try:
        download(target)
    except MNISTNotFoundError as error:  # this is the command the training error suggests: say what else to do
        reason = _reason(error.__cause__ or error)
        names = ", ".join(name for pair in FILES.values() for name in pair)
        print(
            f"ERROR: downloading MNIST into {raw_dir(target)} failed ({reason}). Fix: run this command where there "
            f"is internet (a login node), or copy the files {names} (or their .gz) into {raw_dir(target)}",
            file=sys.stderr,
        )
        return 2
    print(f"MNIST is ready under {raw_dir(target)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
