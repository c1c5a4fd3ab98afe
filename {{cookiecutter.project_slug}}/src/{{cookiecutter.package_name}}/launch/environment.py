"""Read the launcher's environment (Slurm, torchrun, MPI, Lightning) without importing torch.

Hydra composes the config in every rank before torch.distributed exists (under srun and
torchrun each rank runs `train.py` itself), so the run directory and the rank must come
from environment variables that all ranks of one run share.
"""

import os
from datetime import datetime

# The first variable that is set wins: torchrun and Lightning set RANK; horovodrun (gloo)
# sets HOROVOD_RANK; MPI sets the next three, before SLURM_PROCID because mpirun in a Slurm
# job (horovodrun --mpi) starts its ranks under one srun task per node; plain srun sets
# SLURM_PROCID (also for `srun torchrun`, where RANK comes first).
RANK_VARIABLES = (
    "RANK",
    "HOROVOD_RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "LOCAL_RANK",
)


def stale_rank(env=os.environ) -> str | None:
    """What is wrong where RANK or LOCAL_RANK says another rank than 0 but no launcher started this
    process (torchrun and Lightning set WORLD_SIZE beside them; another launcher its own rank):
    a value left in the shell (export RANK=1). train.py then took itself for a rank other than 0,
    trained, and logged nothing nor kept the record that resume= reads."""
    # Another launcher's rank, or Lightning's own start of each node by hand (NODE_RANK, MASTER_ADDR)
    others = [name for name in RANK_VARIABLES if name not in ("RANK", "LOCAL_RANK")] + ["NODE_RANK", "MASTER_ADDR"]
    for name in ("RANK", "LOCAL_RANK"):
        if env.get(name, "0") != "0" and "WORLD_SIZE" not in env and not any(other in env for other in others):
            return (
                f"{name}={env[name]} is set, but no launcher started this process (torchrun and Lightning set "
                f"WORLD_SIZE beside it): train.py would take itself for rank {env[name]} of a job, and log nothing. "
                f"Fix: unset {name}"
            )
    return None


# Whole numbers that launchers set for the processes they start, read with int() by this project and
# by Lightning: a value left in the shell that is not one (export SLURM_NTASKS=abc) met a traceback.
# SLURM_NTASKS_PER_NODE is only tested for being set.
NUMBER_VARIABLES = (
    *RANK_VARIABLES,
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "GROUP_RANK",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_SIZE",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NTASKS",
    "SLURM_NNODES",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_CPUS_PER_TASK",
    "SLURM_RESTART_COUNT",
    "TORCHELASTIC_RESTART_COUNT",
    "HOROVOD_GLOO_RENDEZVOUS_PORT",
    "PL_GLOBAL_SEED",
)


def not_a_number(env=os.environ) -> str | None:
    """What is wrong where a launcher's variable that must be a whole number is not one."""
    for name in NUMBER_VARIABLES:
        value = env.get(name)
        if value is None or value.isascii() and value.isdigit() or value == "" and "RESTART" in name:
            continue  # an empty restart count reads as 0
        return (
            f"{name}={value!r} in the environment: train.py and Lightning read it as a whole number >= 0 "
            "(launchers such as Slurm, torchrun and MPI set it for the processes they start). "
            f"Fix: unset {name}, or start train.py through its launcher"
        )
    return None


def global_rank() -> int:
    """This process's rank in the whole job, 0 when not launched distributed."""
    for name in RANK_VARIABLES:
        if name in os.environ:
            return int(os.environ[name])
    return 0


def _started() -> str:
    """This process's start: time and pid, so that two runs started in the same second differ."""
    return f"{datetime.now():%Y-%m-%d_%H-%M-%S}_{os.getpid()}"


def _slurm_run_id(env) -> str:
    """One directory per run, also for several runs in one allocation.

    The batch job and its first job step share `slurm-<job>` (a requeued job, same id, finds
    it again); a later step (`srun` number N > 0 of the job) gets `slurm-<job>.N`. In an
    interactive allocation (salloc: no ENVIRONMENT=BATCH) every srun is its own step, and a
    `python train.py` typed into the allocation's shell gets its start time.
    """
    job = env["SLURM_JOB_ID"]
    if "SLURM_ARRAY_JOB_ID" in env:
        job = f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    step = env.get("SLURM_STEP_ID")
    if step is not None and not step.isdigit():
        step = None  # the batch or extern step
    if env.get("ENVIRONMENT") == "BATCH":
        return f"slurm-{job}" if step in (None, "0") else f"slurm-{job}.{step}"
    if step is not None:
        return f"slurm-{job}.{step}"
    return env.setdefault("RUN_ID", f"slurm-{job}-{_started()}")


def sweep_id() -> str:
    """A sweep's folder name (hydra.sweep.dir). In a Slurm batch job or job step, the job's run
    id: a job that Slurm requeues (a node failure, a preemption) runs the sweep again in the same
    folder, where each finished point ends at once and the stopped one resumes; with the start
    time it began every point again, from scratch, in a new folder. Elsewhere the start time and
    process id (typed into an allocation's shell too, as a run's)."""
    env = os.environ
    if "SLURM_JOB_ID" in env and (env.get("ENVIRONMENT") == "BATCH" or (env.get("SLURM_STEP_ID") or "").isdigit()):
        return _slurm_run_id(env)
    return _started()


def default_run_id() -> str:
    """A name for this run that every rank computes identically, and that survives requeues.

    - Slurm: the job id (unchanged when Slurm requeues the job, so the run resumes in place);
      see _slurm_run_id for job steps and interactive allocations.
    - torchrun: its rendezvous id; with the default id ("none") the id of the torchrun
      agent process, which is the parent of all local workers.
    - horovodrun (gloo): the date and its rendezvous port, which all its workers share.
    - mpirun (also under horovodrun --mpi): the date and the job's PMIx namespace.
    - otherwise: the start time and process id, kept in the environment variable RUN_ID: the
      value stays the same when the config is resolved again, and the processes that
      Lightning's launcher starts inherit it.
    """
    env = os.environ
    if "SLURM_JOB_ID" in env:
        return _slurm_run_id(env)
    if "TORCHELASTIC_RUN_ID" in env:
        run_id = env["TORCHELASTIC_RUN_ID"]
        return f"torchrun-{os.getppid() if run_id == 'none' else run_id}"
    if "HOROVOD_GLOO_RENDEZVOUS_PORT" in env:
        return f"horovod-{datetime.now():%Y-%m-%d}-{env['HOROVOD_GLOO_RENDEZVOUS_PORT']}"
    if "PMIX_NAMESPACE" in env:
        return f"mpi-{datetime.now():%Y-%m-%d}-{env['PMIX_NAMESPACE']}"
    return env.setdefault("RUN_ID", _started())


def restarted() -> bool:
    """Slurm requeued this job, or torchrun restarted its workers: continue the run in place."""
    env = os.environ
    return int(env.get("SLURM_RESTART_COUNT") or 0) > 0 or int(env.get("TORCHELASTIC_RESTART_COUNT") or 0) > 0


def register_resolvers() -> None:
    """Make the functions above usable in the YAML configs as `${run_id:}` etc."""
    from omegaconf import OmegaConf

    from .run_directory import output_subdir

    OmegaConf.register_new_resolver("default_run_id", default_run_id, replace=True)
    # Like Hydra's ${now:}: cached in the config, so that a sweep's Slurm jobs, which resolve the
    # pickled config again in other processes, find the sweep directory the sweep started.
    OmegaConf.register_new_resolver("sweep_id", sweep_id, replace=True, use_cache=True)
    OmegaConf.register_new_resolver("hydra_output_subdir", output_subdir, replace=True)
    OmegaConf.register_new_resolver("slurm_job", _slurm_job, replace=True)
    from .command_line import config_groups  # for `--help`: the choices without bases and test-only ones

    OmegaConf.register_new_resolver("config_groups", config_groups, replace=True)


def _slurm_job(key: str, *, _root_):
    """`${slurm_job:KEY}`: sbatch options of a sweep point (slurm/sweep.py, read only by sweeps)."""
    from ..slurm.sweep import slurm_job

    return slurm_job(key, _root_=_root_)
