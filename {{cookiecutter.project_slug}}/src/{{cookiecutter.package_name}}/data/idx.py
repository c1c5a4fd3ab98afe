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


class NotAnIdxFile(ValueError):
    """Not a whole uint8 IDX file: another format, or one cut short (an interrupted download or copy)."""


def _header(path: Path, data: bytes) -> tuple[tuple[int, ...], int]:
    """The array's shape, and where its data starts."""
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] != _UINT8 or len(data) < 4 + 4 * data[3]:
        raise NotAnIdxFile(f"{path} is not a uint8 IDX file ({len(data)} bytes, which begin {data[:4]!r})")
    ndim = data[3]
    return struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim]), 4 + 4 * ndim


def _check_size(path: Path, shape: tuple[int, ...], size: int) -> None:
    expected = int(np.prod(shape))
    if size != expected:
        raise NotAnIdxFile(f"{path} holds {size} bytes of data where its header says {expected} (cut short)")


def _read(path: Path, size: int = -1) -> bytes:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            return f.read(size)
    except (OSError, EOFError) as error:  # a gzip file cut short: "Compressed file ended before ..."
        raise NotAnIdxFile(f"{path} cannot be read whole ({error})") from error


def read_idx(path: Path) -> torch.Tensor:
    data = _read(path)
    shape, offset = _header(path, data)
    _check_size(path, shape, len(data) - offset)
    array = np.frombuffer(data, dtype=np.uint8, offset=offset)
    return torch.from_numpy(array.reshape(shape).copy())


def count_idx(path: Path) -> int:
    """The number of items (the first dimension), read from the header only."""
    return _header(path, _read(path, 4 + 4 * 255))[0][0]


def map_idx(path: Path) -> np.ndarray:
    """An uncompressed IDX file as a read-only array backed by the file: the operating system
    reads the parts that are used, so files larger than memory work."""
    with open(path, "rb") as f:
        shape, offset = _header(path, f.read(4 + 4 * 255))
    _check_size(path, shape, path.stat().st_size - offset)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=shape)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as IDX (used by the tests to make small MNIST files)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">HBB", 0, _UINT8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if Path(path).suffix == ".gz" else open
    with opener(path, "wb") as f:
        f.write(header + array.tobytes())
