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


def read_idx(path: Path) -> torch.Tensor:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != _UINT8:
        raise ValueError(f"{path} is not a uint8 IDX file")
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return torch.from_numpy(array.reshape(shape).copy())


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as IDX (used by the tests to make small MNIST files)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">HBB", 0, _UINT8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if Path(path).suffix == ".gz" else open
    with opener(path, "wb") as f:
        f.write(header + array.tobytes())
