"""Hydra's basic launcher (configs/hydra/launcher/local.yaml, the default of `python train.py -m`),
with honest ends. It runs the points one after another in this process, as Hydra's does.

Hydra's own printed nothing when a point raised, ran the other points, and then ended with the
first such point's traceback: no summary, and the other failures never shown. A point refused
once the machine was known (one line, exit 2: data.batch_size larger than the data, two devices)
ended the whole sweep, and its later points never ran. Here:
- a point that raises prints its traceback when it ends, and the sweep goes on;
- a refused point stops the sweep only if it is the first (exit 2, nothing made, as a refused
  run); after that it is named, and the sweep goes on;
- when a point did not finish, the sweep ends with a line for each such point (the command that
  resumes or repeats it), the summary with every point's state, and exit 1.
Ctrl-C, SIGTERM or a checkpoint that could not be written still end the whole sweep.
"""

import functools
import shlex
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.utils import JobReturn, JobStatus

from .run_directory import resume_command, shown
from .sweeps import check_sweep_folder, end_unfinished, point_summary


class PointRefused(Exception):
    """A point's start was refused; its line (ERROR: ...) is printed above."""


class LocalSweepLauncher(BasicLauncher):
    def setup(self, *, hydra_context, task_function, config) -> None:
        check_sweep_folder(config)
        self.points_started = 0
        super().setup(hydra_context=hydra_context, task_function=self._point(task_function), config=config)

    def _point(self, train):
        """train.py's main for one point: a refusal after the first point, or an exception, becomes
        the point's failure (Hydra records it and runs the next point)."""

        @functools.wraps(train)
        def point(cfg):
            self.points_started += 1
            try:
                return train(cfg)
            except SystemExit as end:  # train.py's one line was printed: 2 a refusal, 130 Ctrl-C, ...
                if end.code != 2 or self.points_started == 1:
                    raise
                raise PointRefused from None
            except Exception:
                traceback.print_exc()  # now, as a run's crash is printed; the sweep names it at its end
                raise

        return point

    def launch(self, job_overrides, initial_job_idx) -> list[JobReturn]:
        results = super().launch(job_overrides, initial_job_idx)
        if all(result.status == JobStatus.COMPLETED for result in results):
            return results
        _report(Path(str(self.config.hydra.sweep.dir)), results)


def _report(sweep_dir: Path, results: list[JobReturn]) -> NoReturn:
    """A line for each point that did not finish, then the summary and exit 1 (sweeps.end_unfinished)."""
    from ..callbacks.checkpoints import newest_checkpoint
    from ..slurm.sweep import as_typed  # here, not at the top: it brings Jinja

    points = []
    for result in results:
        num, error = result.hydra_cfg.hydra.job.num, result._return_value
        directory = Path(result.hydra_cfg.hydra.runtime.output_dir)
        if result.status == JobStatus.COMPLETED:
            points.append(point_summary(directory, "COMPLETED"))
            continue
        again = f"Again: {shlex.join(['python', 'train.py', *map(as_typed, result.overrides)])}"
        if isinstance(error, PointRefused):  # its directory was removed: nothing made
            point = {"num": num, "overrides": list(result.overrides), "directory": None, "slurm_job": None,
                     "state": "REFUSED", "checkpoints": [], "continue": again}  # fmt: skip
            print(f"Point {num} refused (its line above), nothing made. {again}", file=sys.stderr)
        else:
            point = point_summary(directory, "FAILED")
            newest = newest_checkpoint(directory) if point["checkpoints"] else None
            point["error"] = _first_line(error)
            point["continue"] = f"Resume: {resume_command(directory)}" if newest else again
            saved = f"saved at step {newest[1]}" if newest else "nothing saved"
            print(f"Point {num} failed in {shown(directory)} ({point['error']}; traceback above), {saved}. "
                  f"{point['continue']}", file=sys.stderr)  # fmt: skip
        points.append(point)
    end_unfinished(sweep_dir, points)


def _first_line(error: BaseException) -> str:
    """`RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB ...`: the error's first line."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
