"""Read and write the IDX format that MNIST ships in (http://yann.lecun.com/exdb/mnist/).

An IDX file is: two zero bytes, a type code (0x08 = uint8), the number of dimensions,
each dimension as a big-endian uint32, then the data. Gzipped files are read as well.
"""

import gzip
import struct
from pathlib import Path

import numpy as np
import torch

_UINT8 = 0x08


def _header(path: Path, data: bytes) -> tuple[tuple[int, ...], int]:
    """The array's shape, and where its data starts."""
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != _UINT8:
        raise ValueError(f"{path} is not a uint8 IDX file")
    return struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim]), 4 + 4 * ndim


def read_idx(path: Path) -> torch.Tensor:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    shape, offset = _header(path, data)
    array = np.frombuffer(data, dtype=np.uint8, offset=offset)
    return torch.from_numpy(array.reshape(shape).copy())


def count_idx(path: Path) -> int:
    """The number of items (the first dimension), read from the header only."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return _header(path, f.read(4 + 4 * 255))[0][0]


def map_idx(path: Path) -> np.ndarray:
    """An uncompressed IDX file as a read-only array backed by the file: the operating system
    reads the parts that are used, so files larger than memory work."""
    with open(path, "rb") as f:
        shape, offset = _header(path, f.read(4 + 4 * 255))
    return np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=shape)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as IDX (used by the tests to make small MNIST files)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">HBB", 0, _UINT8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if Path(path).suffix == ".gz" else open
    with opener(path, "wb") as f:
        f.write(header + array.tobytes())
