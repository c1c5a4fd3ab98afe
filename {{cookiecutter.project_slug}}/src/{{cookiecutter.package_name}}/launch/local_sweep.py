"""Hydra's basic launcher (configs/hydra/launcher/local.yaml, the default of `python train.py -m`),
with honest ends. It runs the points one after another in this process, as Hydra's does.

Hydra's own printed nothing when a point raised, ran the other points, and then ended with the
first such point's traceback: no summary, and the other failures never shown. A point refused
once the machine was known (one line, exit 2: data.batch_size larger than the data, two devices)
ended the whole sweep, and its later points never ran. Here:
- a point that raises prints its traceback when it ends, and the sweep goes on;
- a refused point stops the sweep only if it is the first (exit 2, nothing made, as a refused
  run); after that it is named, and the sweep goes on;
- a point that its +trainer.max_time ended before its end (TIMEOUT) says how to train on, and the
  sweep goes on;
- when a point did not finish, the sweep ends with a line for each such point (the command that
  resumes or repeats it), the summary with every point's state, and exit 1.
Ctrl-C, SIGTERM or a checkpoint that could not be written still end the whole sweep, with the
stopped point's line (how to resume it), then a line for each point that did not train (the
command that runs it), the summary, and the stop's exit code (130, 143, 1).
"""

import functools
import shlex
import sys
import traceback
from pathlib import Path

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn

from .errors import TIME_LIMIT_EXIT
from .run_directory import resume_command, shown
from .sweeps import check_sweep_folder, end_unfinished, point_summary, write_summary


class PointRefused(Exception):
    """A point's start was refused; its line (ERROR: ...) is printed above."""


class LocalSweepLauncher(BasicLauncher):
    def setup(self, *, hydra_context, task_function, config) -> None:
        check_sweep_folder(config)
        self.points: list[dict] = []  # how each started point ended (_point)
        super().setup(hydra_context=hydra_context, task_function=self._point(task_function), config=config)

    def _point(self, train):
        """train.py's main for one point: a refusal after the first point, or an exception, becomes
        the point's failure (Hydra records it and runs the next point)."""

        @functools.wraps(train)
        def point(cfg):
            hydra = HydraConfig.get()
            record = {"num": hydra.job.num, "overrides": list(hydra.overrides.task),
                      "directory": Path(hydra.runtime.output_dir), "state": "COMPLETED"}  # fmt: skip
            self.points.append(record)
            try:
                return train(cfg)
            except SystemExit as end:  # train.py's one line was printed: 2 a refusal, 130 Ctrl-C, ...
                if end.code == TIME_LIMIT_EXIT:  # the point's own +trainer.max_time: the next point has its own
                    record["state"] = "TIMEOUT"
                    return None
                if end.code != 2 or len(self.points) == 1:
                    record["state"] = "STOPPED"
                    if not record["directory"].is_dir():  # stopped before training: train.py removed it
                        self.points.pop()  # as if it never started
                    raise
                record["state"] = "REFUSED"
                raise PointRefused from None
            except Exception as error:
                record["state"], record["error"] = "FAILED", error
                traceback.print_exc()  # now, as a run's crash is printed; the sweep names it at its end
                raise

        return point

    def launch(self, job_overrides, initial_job_idx) -> list[JobReturn]:
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        try:
            results = super().launch(job_overrides, initial_job_idx)
        except SystemExit as end:
            # not after a refusal (2): nothing was made; nor when the first point made nothing
            if end.code != 2 and sweep_dir.is_dir():
                unstarted = enumerate(job_overrides[len(self.points) :], initial_job_idx + len(self.points))
                _report_stop(sweep_dir, self.points, list(unstarted), end)
            raise
        if all(point["state"] == "COMPLETED" for point in self.points):
            return results
        end_unfinished(sweep_dir, [_summary(point) for point in self.points])


def _summary(point: dict) -> dict:
    """The point's entry in the summary; for one that did not finish, a line that says how to go on."""
    from ..callbacks.checkpoints import newest_checkpoint

    num, state, directory = point["num"], point["state"], point["directory"]
    again = f"Again: {_command(point['overrides'])}"
    if state == "REFUSED":  # its directory was removed: nothing made
        print(f"Point {num} refused (its line above), nothing made. {again}", file=sys.stderr)
        return {**point, "directory": None, "slurm_job": None, "checkpoints": [], "continue": again}
    summary = point_summary(directory, state)
    if state == "COMPLETED":
        return summary
    newest = newest_checkpoint(directory) if summary["checkpoints"] else None
    summary["continue"] = f"Resume: {resume_command(directory)}" if newest else again
    if state == "TIMEOUT":  # its time limit counts the whole run's time: a resume needs a longer one
        summary["continue"] += " +trainer.max_time=<a longer time for the whole run>"
    if state == "FAILED":
        summary["error"] = _first_line(point["error"])
        saved = f"saved at step {newest[1]}" if newest else "nothing saved"
        print(f"Point {num} failed in {shown(directory)} ({summary['error']}; traceback above), {saved}. "
              f"{summary['continue']}", file=sys.stderr)  # fmt: skip
    return summary  # STOPPED: its own line said how to resume it


def _report_stop(sweep_dir: Path, points: list[dict], unstarted: list[tuple[int, list[str]]], end: SystemExit) -> None:
    """After the stop's line: a line for each point that did not train, the summary, the last line."""
    summaries = [_summary(point) for point in points]
    for num, overrides in unstarted:
        again = f"Again: {_command(overrides)}"
        print(f"Point {num} did not train. {again}", file=sys.stderr)
        summaries.append({"num": num, "overrides": list(overrides), "directory": None, "slurm_job": None,
                          "state": "PENDING", "checkpoints": [], "continue": again})  # fmt: skip
    summary = write_summary(sweep_dir, summaries)
    print(f"The sweep was stopped (exit {end.code}): {len(unstarted)} of {len(summaries)} points did not train "
          f"(PENDING). Summary: {shown(summary)}", file=sys.stderr)  # fmt: skip


def _command(overrides: list[str]) -> str:
    from ..slurm.sweep import as_typed  # here, not at the top: it brings Jinja

    return shlex.join(["python", "train.py", *map(as_typed, overrides)])


def _first_line(error: BaseException) -> str:
    """`RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB ...`: the error's first line."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
