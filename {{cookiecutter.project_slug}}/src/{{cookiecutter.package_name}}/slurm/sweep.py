"""What Hydra's submitit launcher needs to submit one sweep point as a Slurm job.

`python train.py -m hydra/launcher=slurm cluster=lumi model.optimizer.lr=1e-3,1e-4` submits a
job per point (configs/hydra/launcher/slurm.yaml). Its sbatch options come from the same
cluster profile and the same rules as the rendered scripts (render.py): one task per GPU,
the profile's account, partition, CPUs, memory, GPUs, time, modules and environment, and
SIGUSR1 before the time limit, on which callbacks/requeue.py saves and requeues the job.
"""

from omegaconf import DictConfig, OmegaConf

from .render import SIGNAL_SECONDS, Job, gpu_options, memory, partition, software
from .render import environment as environment_lines


def job_for(root: DictConfig) -> Job:
    """The Slurm job of one training run as the config composed it (profile, size, strategy)."""
    cluster = OmegaConf.to_container(root.cluster, resolve=True)
    nodes, gpus = root.trainer.num_nodes, root.trainer.devices
    return Job(cluster, root.strategy.name, "srun", nodes, gpus)


def _minutes(time: str) -> int:
    """Slurm's [D-]HH:MM:SS as whole minutes (submitit's timeout_min)."""
    days, _, clock = str(time).rpartition("-")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return (int(days or 0) * 24 + hours) * 60 + minutes + (1 if seconds else 0)


def launcher_options(root: DictConfig) -> dict:
    """submitit_slurm's parameters for this config (see configs/hydra/launcher/slurm.yaml)."""
    job = job_for(root)
    slurm = job.slurm
    extra = dict(gpu_options(job))
    if memory(job) is not None:
        extra["mem"] = memory(job)
    # Our own signal, not submitit's USR2: Lightning then saves a checkpoint before requeueing.
    extra.update({"signal": f"SIGUSR1@{SIGNAL_SECONDS}", "requeue": True})
    srun_args = ["--kill-on-bad-exit=1", *(slurm.get("srun_args") or [])]
    if job.full_nodes:
        srun_args += slurm.get("full_node_srun_args") or []
    if job.needs_mpi and slurm.get("mpi"):
        srun_args.append(f"--mpi={slurm['mpi']}")
    setup = [
        *software(job),
        *environment_lines(job),
        "# srun does not pass --cpus-per-task on to its tasks by itself (Slurm >= 22.05).",
        "export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK",
    ]
    return {
        "account": slurm.get("account") or None,
        "partition": partition(job),
        "nodes": job.nodes,
        "tasks_per_node": job.tasks_per_node,
        "cpus_per_task": slurm["cpus_per_gpu"] * job.processes_per_task,
        "timeout_min": _minutes(slurm["time"]),
        "srun_args": srun_args,
        # One element: submitit writes the lines as they are, in this order.
        "setup": ["\n".join(setup)],
        "additional_parameters": extra,
    }


def slurm_job(key: str, *, _root_: DictConfig):
    """The resolver `${slurm_job:KEY}` of configs/hydra/launcher/slurm.yaml."""
    return launcher_options(_root_)[key]
