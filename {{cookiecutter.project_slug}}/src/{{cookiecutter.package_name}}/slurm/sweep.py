"""What Hydra's submitit launcher needs to submit one sweep point as a Slurm job.

`python train.py -m hydra/launcher=slurm cluster=lumi model.optimizer.lr=1e-3,1e-4` submits a
job per point (configs/hydra/launcher/slurm.yaml). Its sbatch options, setup lines and srun
options are the rendered scripts' own (render.job_options): one task per GPU, the profile's
account, partition, CPUs, memory, GPUs, time, modules and environment, and SIGUSR1 before
the time limit, on which callbacks/requeue.py saves a checkpoint and requeues the job.
Before anything is submitted, the checks here refuse what the jobs would not do as asked;
resume_command names how a stopped point resumes.
"""

import math
import shlex
import shutil
import subprocess

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from ..launch.errors import SetupError
from ..launch.run_directory import _key
from .checks import seconds, slurm_time
from .profiles import ProfileError
from .render import job_options

# submitit's own parameters for these; it writes its own --output, --job-name and --array.
NAMED = {"account": "account", "partition": "partition", "nodes": "nodes", "ntasks-per-node": "tasks_per_node"}
OWN = ("job-name", "output", "open-mode", "cpus-per-task", "time")
PARSER = OverridesParser.create()
# hydra.launcher's settings that the cluster profile gives every job, and where the profile sets
# them: sbatch --test-only, the requeue and a resumed point's job then ask for the same.
PROFILE_KEYS = {
    "account": "cluster.slurm.account={value}",
    "partition": "cluster.slurm.partition={value}",
    "timeout_min": "cluster.slurm.time={value}",
    "nodes": "cluster.num_nodes={value}",
    "tasks_per_node": "cluster.devices={value}",
    "cpus_per_task": "cluster.slurm.cpus_per_gpu={value}",
    # a dict of #SBATCH options: replacing it dropped the GPUs, the memory and the requeue signal
    "additional_parameters": "+cluster.slurm.sbatch.{option}={value}",
    "srun_args": "cluster.slurm.srun_args=[...]",
    "setup": "cluster.slurm.modules=[...], +cluster.slurm.env.NAME=VALUE",
}
# submitit's own settings that a sweep may change, and the values each takes.
SUBMITIT_SETTINGS = {
    "array_parallelism": (lambda value: type(value) is int and value >= 1, "a whole number, 1 or more"),
    "stderr_to_stdout": (lambda value: isinstance(value, bool), "true or false"),
    "name": (lambda value: isinstance(value, str) and value.strip() != "", "a job name"),
    "submitit_folder": (lambda value: isinstance(value, str) and value.strip() != "", "a folder (%j: the job id)"),
}
# submitit's requeue on its own signal (USR2 before the time limit), which the jobs do not use.
SUBMITIT_REQUEUE = ("max_num_timeout", "signal_delay_s")


def _minutes(time: str) -> int:
    """A Slurm time as whole minutes (submitit's timeout_min; before, `30`, which Slurm reads as
    minutes, became 1)."""
    return 0 if seconds(time) == math.inf else math.ceil(seconds(time) / 60)  # inf: check_slurm_jobs refuses it


def _point_job(root: DictConfig) -> dict:
    devices = root.trainer.devices
    if devices in (-1, "auto"):  # every GPU of a node, as the renderer's gpus=all
        devices = None
    elif isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:  # the job's refusal said gpus=
        raise ProfileError(
            f"trainer.devices={devices}: a point's job takes a node's GPUs by number. Fix: e.g. trainer.devices=4, "
            "or -1 (auto) for all of a node's"
        )
    return job_options(root.cluster, root.trainer.num_nodes, devices, root.strategy.name, "srun")


def check_slurm_sweep(multirun: bool) -> None:
    """hydra/launcher=slurm submits a sweep's points with sbatch: with -m, where sbatch is."""
    if not multirun:
        raise SetupError(
            "hydra/launcher=slurm: Hydra's launchers run sweeps (-m); without -m train.py would train here. "
            f"Fix: python train.py -m hydra/launcher=slurm ..., or one job: python -m {__package__} --submit "
            "cluster=<name> -- <overrides>"
        )
    if shutil.which("sbatch") is None:
        raise SetupError(
            "hydra/launcher=slurm submits each point with sbatch, which is not on this machine. Fix: start the "
            "sweep on the cluster's login node, or leave out hydra/launcher=slurm to run the points here one by one"
        )


def check_launcher_overrides(overrides: list[str]) -> None:
    """hydra.launcher.timeout_min=720 and the like changed the submitted jobs alone: sbatch
    --test-only judged the profile's, and a resumed point's job asked for the profile's again.
    +hydra.launcher.additional_parameters.qos=... replaced every other #SBATCH option."""
    for override in PARSER.parse_overrides(overrides):
        if not override.key_or_group.startswith("hydra.launcher.") or override.is_delete():
            continue
        setting, _, option = override.key_or_group.removeprefix("hydra.launcher.").partition(".")
        value = override.value()
        if setting in SUBMITIT_SETTINGS:
            takes, allowed = SUBMITIT_SETTINGS[setting]
            if not takes(value):
                fix = f"hydra.launcher.{setting}=<value>"
                raise SetupError(f"{override.input_line}: submitit's {setting} takes {allowed}. Fix: {fix}")
            continue
        if setting in SUBMITIT_REQUEUE:
            raise SetupError(
                f"{override.input_line}: a sweep's jobs do not requeue through submitit: callbacks/requeue.py saves "
                f"and requeues a point on the profile's SIGUSR1 before its time limit. Fix: leave out {setting}"
            )
        key = setting
        if key not in PROFILE_KEYS:  # another of submitit's Slurm options (qos, mail_type, ...), or none
            option, key = setting.replace("_", "-"), "additional_parameters"
        value = slurm_time(value * 60) if key == "timeout_min" and isinstance(value, int) else value
        value = "null" if value is None else value
        if key == "additional_parameters" and not option:  # the whole dict
            option, value = "<option>", "<value>"
        fix = PROFILE_KEYS[key].format(option=option, value=value)
        raise SetupError(
            f"{override.input_line}: the cluster profile sets each sweep job's {setting}, so that its check "
            f"and a resumed point's job ask for the same. Fix: {fix}"
        )


def check_slurm_jobs(points: list[DictConfig], overrides: list[str]) -> None:
    """Each distinct job of a sweep's points, from its cluster profile and as Slurm judges it
    (`sbatch --test-only`: its account, partition, time and resources), before anything is
    submitted: a refusal then ended in submitit's traceback. The points must ask for one kind of
    job: Hydra's submitit launcher submits them all with one set of options (the sweep's without
    its swept values), and a point of another size failed in its job."""
    jobs = {}
    for root in points:
        try:
            job = _point_job(root)
        except ProfileError as error:  # says what to use instead
            raise SetupError(f"hydra/launcher=slurm: {error}") from error
        jobs.setdefault(str([job["sbatch"], job["srun"], job["setup"]]), job)
    if len(jobs) > 1:
        swept = [item.input_line for item in PARSER.parse_overrides(overrides) if item.is_sweep_override()]
        first, other = (job["sbatch"] for job in list(jobs.values())[:2])
        keys = [key for key in {**first, **other} if first.get(key) != other.get(key)]
        differ = [f"--{key} {first.get(key, '(none)')} and {other.get(key, '(none)')}" for key in keys]
        raise SetupError(
            f"hydra/launcher=slurm: the points ask for {len(jobs)} kinds of job "
            f"({', '.join(differ) or 'their srun options or setup lines differ'}), and Hydra's submitit launcher "
            f"submits every point of a sweep as one. Fix: a sweep for each kind, each with one value of what changes "
            f"the job (swept here: {' '.join(swept)})"
        )
    for sbatch in (job["sbatch"] for job in jobs.values()):
        if seconds(sbatch["time"]) == math.inf:  # submitit would ask for its default instead, 5 minutes
            raise SetupError(
                f"hydra/launcher=slurm: cluster.slurm.time={sbatch['time']}: a sweep's jobs need a time limit. "
                "Fix: e.g. cluster.slurm.time=1-00:00:00"
            )
        options = [f"--{key}" + ("" if value is None else f"={value}") for key, value in sbatch.items()]
        result = subprocess.run(["sbatch", "--test-only", *options, "--wrap=true"], capture_output=True, text=True)
        said = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        if result.returncode != 0:
            raise SetupError(
                f"hydra/launcher=slurm: sbatch --test-only refuses the points' jobs "
                f"({said[-1] if said else result.returncode}). Fix: the profile's account and partition "
                f"(cluster.slurm.account=..., cluster.slurm.partition=...; `python -m {__package__} cluster=<name>` "
                "shows a job's #SBATCH lines); submit from the cluster's login node"
            )


def launcher_options(root: DictConfig) -> dict:
    """submitit_slurm's parameters for this config (see configs/hydra/launcher/slurm.yaml)."""
    job = _point_job(root)
    sbatch = job["sbatch"]
    options = {key: sbatch.get(option) for option, key in NAMED.items()}
    extra = {key: True if value is None else value for key, value in sbatch.items() if key not in (*NAMED, *OWN)}
    # srun in a submitit job is given its arguments quoted: "$SLURM_CPUS_PER_TASK" would stay
    # text there, so the CPUs per task reach srun through its environment instead.
    srun = [option for option in job["srun"] if not option.startswith("--cpus-per-task")]
    setup = [*job["setup"], "export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK  # srun does not pass it on by itself"]
    return {
        **options,
        "cpus_per_task": sbatch["cpus-per-task"],
        "timeout_min": _minutes(sbatch["time"]),
        "srun_args": ["--kill-on-bad-exit=1", *srun],  # as in the scripts: a failing rank ends the others
        "setup": ["\n".join(setup)],  # one element: submitit writes the lines as they are
        "additional_parameters": extra,  # GPUs, memory, SIGUSR1@90, requeue
    }


def resume_command(point: DictConfig) -> str:
    """How a stopped point resumes: a job of its size, as `python -m <package>.slurm` renders one,
    with the point's cluster.slurm.* overrides (a sweep takes no resume=, and `python train.py
    resume=...` would train on the login node). `point`: its config, with Hydra's."""
    overrides = point.hydra.overrides.task
    slurm = [as_typed(text) for text in overrides if f"{_key(text)}.".startswith("cluster.slurm.")]
    size = [f"nodes={point.trainer.num_nodes}", f"gpus={point.trainer.devices}"]  # one task per GPU
    settings = [f"cluster={point.cluster.name}", *size, f"strategy={point.strategy.name}", "launcher=srun"]
    return shlex.join(["python", "-m", __package__, *settings, *slurm, "--submit", "--"])


def as_typed(override: str) -> str:
    """A point's override as one would type it: Hydra writes them with escapes (time=00\\:20\\:00)."""
    plain = override.replace("\\:", ":").replace("\\ ", " ")
    return plain if PARSER.parse_override(plain).value() == PARSER.parse_override(override).value() else override


def slurm_job(key: str, *, _root_: DictConfig):
    """The resolver `${slurm_job:KEY}` of configs/hydra/launcher/slurm.yaml."""
    return launcher_options(_root_)[key]
