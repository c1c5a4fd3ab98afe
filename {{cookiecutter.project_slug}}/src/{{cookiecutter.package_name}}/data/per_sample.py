"""A dataset read one sample at a time from files: the path for data larger than memory, or
data that needs work per sample (decoding image files, augmentation).

DataLoader workers (data.num_workers, `auto`: the CPUs of the process less one) read and
collate the next batches while the training process trains. MNIST takes this path with
data.in_memory=false, reading its IDX files through a memory map.
"""

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from .idx import NotAnIdxFile, map_idx


class IdxSamples(Dataset):
    """Samples `indices` (all when None) of uncompressed IDX image and label files:
    uint8 images [C=1, H, W] and int64 labels, as InMemoryImages gives them."""

    def __init__(self, images: Path, labels: Path, indices: torch.Tensor | None = None):
        self.paths = (Path(images), Path(labels))
        images_count, count = (len(map_idx(path)) for path in self.paths)  # each checked whole here
        if images_count != count:
            raise NotAnIdxFile(f"{images} holds {images_count} images, but {labels} {count} labels")
        self.indices = torch.arange(count) if indices is None else indices
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self._arrays is None:  # opened in each worker: a pickled memory map would copy the file
            self._arrays = tuple(map_idx(path) for path in self.paths)
        images, labels = self._arrays
        sample = int(self.indices[index])
        return torch.from_numpy(np.array(images[sample])).unsqueeze(0), int(labels[sample])

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_arrays": None}
