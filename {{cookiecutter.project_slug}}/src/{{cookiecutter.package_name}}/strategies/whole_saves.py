"""Sharded checkpoints (DeepSpeed, FSDP2) written whole or not at all.

These strategies write a checkpoint as a folder, each rank its own shards, in place: a kill
during a save (a node failure, a second Ctrl-C) left last.ckpt/ with some shards new, some old,
some empty, and the run's newest checkpoint unreadable. Here every rank writes into
`<name>.partial/`; once all have, rank 0 puts it in place of `<name>`, by renames, and the
other ranks wait for that. A kill at any point leaves a whole checkpoint: the old one, the new
one, or, between the two renames, the old one as `<stem>-previous.ckpt`, which a resume finds
like any other. The next start removes a `.partial` left behind (callbacks/checkpoints.py).
"""

import os
from pathlib import Path

from ..callbacks.checkpoints import PARTIAL, remove


class WholeSaves:
    """Mixed into a strategy class before Lightning's (`class S(WholeSaves, DeepSpeedStrategy)`)."""

    def writes_folders(self) -> bool:
        """FSDP2 writes one file where asked to (its checkpoint IO then writes it whole already)."""
        return getattr(self, "_save_distributed_checkpoint", True)  # Lightning's name

    def save_checkpoint(self, checkpoint, filepath, storage_options=None):
        if not self.writes_folders():
            return super().save_checkpoint(checkpoint, filepath, storage_options)
        path = Path(self.broadcast(str(filepath)))  # rank 0's name for every rank, as Lightning does
        partial = path.with_name(path.name + PARTIAL)
        if self.is_global_zero:
            remove(partial)  # left by a save that was killed
        self.barrier("partial checkpoint removed")
        super().save_checkpoint(checkpoint, partial, storage_options)
        self.barrier("every shard written")
        if self.is_global_zero:
            put_in_place(partial, path)
        self.barrier("checkpoint in place")


def put_in_place(partial: Path, path: Path) -> None:
    """`partial` becomes `path` (by one rename where there is none yet; else by two, as a rename
    cannot replace a folder)."""
    if not path.exists():
        os.replace(partial, path)
        return
    previous = path.with_name(f"{path.stem}-previous{path.suffix}")
    remove(previous)
    os.replace(path, previous)
    os.replace(partial, path)
    remove(previous)
