"""Hydra's submitit launcher (configs/hydra/launcher/slurm.yaml), with honest ends.

The plugin's own launcher (hydra-submitit-launcher 1.2) hid a point that did not finish:
- In the job, Hydra hands a point's exception back as its result, and the ranks exited 0:
  Slurm said COMPLETED. Here the exception is raised again: the rank exits 1, Slurm says
  FAILED, and srun (--kill-on-bad-exit) ends the point's other ranks.
- On the login node, it waited for the points in order and ended the sweep command with
  submitit's traceback at the first one without a result (cancelled, failed, a node lost),
  while later points still ran, and wrote no sweep_summary.yaml. Here it waits for every
  point; if one did not finish, it writes the summary with each point's state, names each such
  point's log and the command that continues it, and exits 1. Ctrl-C while it waits says that
  the jobs run on, and how to stop them (exit 130).
"""

import logging
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import OmegaConf

from ..launch.command_line import stop
from ..launch.run_directory import discard_sweep_folder, resume_command, shown
from ..launch.sweeps import check_sweep_folder, end_unfinished, point_summary

log = logging.getLogger(__name__)
OWN = ("submitit_folder", "max_num_timeout")  # the executor's, not the jobs' parameters


class SlurmSweepLauncher(SlurmLauncher):
    def setup(self, *, hydra_context, task_function, config) -> None:
        check_sweep_folder(config)
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def __call__(self, *args, **kwargs) -> JobReturn:
        """In each rank of a point's job (see the module's note)."""
        result = super().__call__(*args, **kwargs)
        if result.status == JobStatus.FAILED:
            raise result._return_value  # the point's own exception; submitit records it for the sweep
        return result

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Submits a job per point as the plugin does, then waits for all of them."""
        import submitit
        from submitit.core.utils import FailedJobError

        executor = submitit.AutoExecutor(
            cluster="slurm", folder=self.params["submitit_folder"], slurm_max_num_timeout=self.params["max_num_timeout"]
        )
        queue_keys = set(OmegaConf.structured(BaseQueueConf).keys())
        params = {key if key in queue_keys else f"slurm_{key}": v for key, v in self.params.items() if key not in OWN}
        executor.update_parameters(**params)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(f"Submitit 'slurm' sweep output dir : {sweep_dir}")
        nums = list(range(initial_job_idx, initial_job_idx + len(job_overrides)))
        for num, overrides in zip(nums, job_overrides, strict=True):
            log.info(f"\t#{num} : {' '.join(filter_overrides(overrides))}")
        count = len(nums)
        try:
            jobs = executor.map_array(
                self,
                [list(overrides) for overrides in job_overrides],
                ["hydra.sweep.dir"] * count,
                nums,
                [f"job_id_for_{num}" for num in nums],
                [Singleton.get_state()] * count,
            )
        except FailedJobError as error:  # sbatch refused them (sbatch --test-only had taken them): a quota, a limit
            discard_sweep_folder(sweep_dir, ("multirun.yaml", ".submitit"))  # nothing was submitted
            stop(f"sbatch refused the sweep's jobs: {error}. Fix: what sbatch names, then the same command", code=1)
        try:
            ends = [_end(job) for job in jobs]  # waits for each
        except KeyboardInterrupt:
            array = jobs[0].job_id.split("_")[0]
            print(f"\nStopped waiting by Ctrl-C: the sweep's jobs run on (squeue --me; scancel {array} "
                  f"stops them, a running point with a save). Their folders: {shown(sweep_dir)}/<n>",
                  file=sys.stderr)  # fmt: skip
            sys.exit(130)
        if all(state == "COMPLETED" for _, state in ends):
            return [result for result, _ in ends]
        _report(sweep_dir, nums, job_overrides, jobs, [state for _, state in ends])


def _end(job) -> tuple[JobReturn | None, str]:
    """A point's result, and how its job ended, in Slurm's words (COMPLETED, FAILED, CANCELLED...)."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    try:
        return job.results()[0], "COMPLETED"
    except FailedJobError:  # a rank raised (see __call__)
        return None, "FAILED"
    except UncompletedJobError:  # no result: stopped from outside (scancel, time limit, a node lost) or exited
        return None, job.state.split()[0]  # sacct's "CANCELLED by <uid>": CANCELLED


def _report(sweep_dir: Path, nums, job_overrides, jobs, states: list[str]) -> NoReturn:
    """A line for each point that did not finish, then the summary and exit 1 (sweeps.end_unfinished)."""
    from ..callbacks.checkpoints import newest_checkpoint

    points = []
    for num, overrides, job, state in zip(nums, job_overrides, jobs, states, strict=True):
        directory = sweep_dir / str(num)
        if (directory / ".hydra" / "hydra.yaml").exists():  # the point started
            point = point_summary(directory, state)
        else:
            point = {"num": num, "overrides": list(overrides), "directory": None, "slurm_job": job.job_id,
                     "state": state, "checkpoints": []}  # fmt: skip
        if state != "COMPLETED":
            newest = newest_checkpoint(directory) if point["checkpoints"] else None
            point["continue"] = _continue_command(directory, point["overrides"], saved=newest is not None)
            saved = f"saved at step {newest[1]}" if newest else "nothing saved"
            print(f"Point {num} (Slurm job {job.job_id}) {state}, {saved}; logs: {shown(job.paths.folder)}/. "
                  f"{point['continue']}", file=sys.stderr)  # fmt: skip
        points.append(point)
    end_unfinished(sweep_dir, points)


def _continue_command(directory: Path, overrides: list[str], saved: bool) -> str:
    """Resume: a job of the point's size, from its checkpoints. Again: the point alone, as a sweep."""
    # Here, not at the top: Hydra imports this module at every start, and .sweep brings Jinja.
    from .sweep import as_typed
    from .sweep import resume_command as point_resume_command

    if saved:
        config = OmegaConf.load(directory / ".hydra" / "config.yaml")
        config.hydra = OmegaConf.load(directory / ".hydra" / "hydra.yaml").hydra
        return f"Resume: {resume_command(directory, point_resume_command(config))}"
    return f"Again: {shlex.join(['python', 'train.py', '-m', 'hydra/launcher=slurm', *map(as_typed, overrides)])}"
