"""A CSV logger whose metrics.csv survives a resume.

Lightning's CSVLogger deletes the metrics.csv it finds in its folder when it starts ("Previous
log files in this directory will be deleted"): every resume or Slurm requeue of a run with
`logger=csv` lost the rows of the starts before it. This one keeps the file and appends, as
TensorBoard's event files are kept. A start that resumes from a checkpoint older than its last
rows logs those steps again, after them.
"""

import csv

from pytorch_lightning.loggers import CSVLogger
from pytorch_lightning.loggers.csv_logs import ExperimentWriter
from pytorch_lightning.loggers.logger import rank_zero_experiment


class AppendingWriter(ExperimentWriter):
    def _check_log_dir_exists(self) -> None:
        """Instead of deleting metrics.csv: take its columns, so that new rows append under them
        (a new column rewrites the file with every row, as Lightning does)."""
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as file:
                self.metrics_keys = next(csv.reader(file), [])


class AppendingCSVLogger(CSVLogger):
    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = AppendingWriter(log_dir=self.log_dir)
        return self._experiment
