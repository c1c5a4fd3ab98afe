"""Multirun (`python train.py -m ...`): a summary of what each point wrote, the command that
resumes a point of a Slurm sweep (or a run that srun started from a shell), and a guard.

Hydra's basic launcher runs the points one after another inside this process. Lightning's
DDP launcher starts the other ranks by running this command line again, and each of them
would run the whole sweep: a multi-process point needs one job per point
(`hydra/launcher=slurm`), where Slurm starts every rank of the point.
"""

import os
import sys
from pathlib import Path
from typing import NoReturn

import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from .command_line import stop
from .errors import SetupError
from .run_directory import fresh_sweep_folder, shown

SUMMARY = "sweep_summary.yaml"


class SweepSummary(Callback):
    """Writes <sweep dir>/sweep_summary.yaml when a multirun ends: per point its overrides,
    directory, Slurm job, state and checkpoints. Hydra calls this only when every point
    completed; a Slurm sweep's points that did not are reported by slurm/launcher.py."""

    def __setstate__(self, state):
        # Unpickled inside each Slurm job of a sweep (submitit), where train.py's own
        # register_resolvers() did not run: the config's ${default_run_id:} etc. need them.
        from .environment import register_resolvers

        register_resolvers()
        self.__dict__.update(state)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        points = [point_summary(path.parent.parent, "COMPLETED") for path in sweep_dir.glob("*/.hydra/overrides.yaml")]
        if points:
            print(f"Sweep summary: {write_summary(sweep_dir, points)}")


class SlurmResumeCommand(Callback):
    """RESTART_COMMAND, the command that the ranks name after a stop, as a job of this run's size,
    strategy and Slurm settings, where no launcher set one: in each Slurm job of a sweep
    (hydra/launcher=slurm), and under an srun of several tasks typed into a shell (salloc, or
    the login node), where `python train.py resume=...` would train alone, where it is typed."""

    def on_job_start(self, config: DictConfig, **kwargs) -> None:
        sweep_job = config.hydra.runtime.choices.get("hydra/launcher") == "slurm"
        srun_tasks = int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) > 1 and "RESTART_COMMAND" not in os.environ
        if sweep_job or (srun_tasks and config.cluster.get("slurm")):
            from ..slurm.sweep import resume_command

            os.environ["RESTART_COMMAND"] = resume_command(config)


def point_summary(directory: Path, state: str) -> dict:
    """`state`: how its job ended, in Slurm's words (COMPLETED, FAILED, CANCELLED, ...)."""
    hydra = yaml.safe_load((directory / ".hydra" / "hydra.yaml").read_text())["hydra"]
    checkpoints = sorted(str(path.relative_to(directory)) for path in directory.rglob("*.ckpt"))
    return {
        "num": hydra["job"]["num"],
        "overrides": hydra["overrides"]["task"],
        "directory": str(directory),
        # Hydra's job id: Slurm's under hydra/launcher=slurm, else only the point's number
        "slurm_job": hydra["job"].get("id") if hydra["runtime"]["choices"].get("hydra/launcher") == "slurm" else None,
        "state": state,
        "checkpoints": checkpoints,
    }


def write_summary(sweep_dir: Path, points: list[dict]) -> Path:
    path = sweep_dir / SUMMARY
    points = sorted(points, key=lambda point: point["num"])
    path.write_text(yaml.safe_dump({"sweep_dir": str(sweep_dir), "points": points}, sort_keys=False))
    return path


def end_unfinished(sweep_dir: Path, points: list[dict]) -> NoReturn:
    """The end of a sweep of which a point did not finish (its launcher printed a line for each):
    the summary, a last line, exit 1."""
    summary = write_summary(sweep_dir, points)
    unfinished = sum(point["state"] != "COMPLETED" for point in points)
    print(f"ERROR: {unfinished} of {len(points)} points of the sweep did not finish (above). Summary: {shown(summary)}",
          file=sys.stderr)  # fmt: skip
    sys.exit(1)


def check_sweep_folder(config: DictConfig) -> None:
    """The launchers' setup, before Hydra writes <hydra.sweep.dir>/multirun.yaml: one line, exit 2,
    for a sweep into another sweep's folder (other overrides), whose points it would train into and
    whose record it would overwrite. That folder is the Slurm job's for every sweep in a job (so that
    a requeue finds it), or a hydra.sweep.dir= given again. The same sweep again (a requeue) goes on."""
    sweep_dir = Path(str(config.hydra.sweep.dir))
    if not (sweep_dir / "multirun.yaml").is_file():
        return
    earlier = list(OmegaConf.load(sweep_dir / "multirun.yaml").hydra.overrides.task)
    if earlier != list(config.hydra.overrides.task):
        stop(f"hydra.sweep.dir={shown(sweep_dir)} holds another sweep ({' '.join(earlier) or 'no overrides'}), "
             f"whose points this one would train into. Fix: {fresh_sweep_folder(sweep_dir)}")  # fmt: skip


def check_multirun(cfg: DictConfig, processes: int, processes_key: str) -> None:
    """Refuse a multi-process point in a multirun on this machine (see the module's note).
    `processes`: as the Trainer counts them (trainer.devices=auto or -1: every GPU it sees);
    `processes_key`: what sets them."""
    if not HydraConfig.initialized():
        return
    hydra = HydraConfig.get()
    if hydra.mode != RunMode.MULTIRUN or hydra.runtime.choices.get("hydra/launcher") == "slurm":
        return
    if processes > 1:
        raise SetupError(
            f"multirun with {processes} processes ({processes_key}; trainer.devices={cfg.trainer.devices} x "
            f"trainer.num_nodes={cfg.trainer.num_nodes}): "
            "on this machine Hydra runs the points one by one in this process, and each DDP rank would start "
            "the whole sweep again.\n"
            "Fix: submit one Slurm job per point (-m hydra/launcher=slurm cluster=...), "
            "or sweep single-process runs (trainer.devices=1)."
        )
