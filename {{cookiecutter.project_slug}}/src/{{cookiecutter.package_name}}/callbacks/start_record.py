"""Each checkpoint names the start that wrote it (its config record in `.hydra/`), so that
`resume=` takes that start's overrides. File times cannot tell it in a run folder copied
without them (`cp -r`: every file as new as the copy)."""

import pytorch_lightning as pl

KEY = "start_record"


class StartRecord(pl.Callback):
    def __init__(self, subdir: str):
        self.subdir = subdir  # `.hydra` or `.hydra/resumes/<time>`, relative to the run directory

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        checkpoint[KEY] = self.subdir
