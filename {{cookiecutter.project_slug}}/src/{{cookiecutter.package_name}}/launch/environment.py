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
_RANK_VARIABLES = (
    "RANK",
    "HOROVOD_RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "LOCAL_RANK",
)


def global_rank() -> int:
    """This process's rank in the whole job, 0 when not launched distributed."""
    for name in _RANK_VARIABLES:
        if name in os.environ:
            return int(os.environ[name])
    return 0


def default_run_id() -> str:
    """A name for this run that every rank computes identically, and that survives requeues.

    - Slurm: the job id (unchanged when Slurm requeues the job, so the run resumes in place).
    - torchrun: its rendezvous id; with the default id ("none") the id of the torchrun
      agent process, which is the parent of all local workers.
    - horovodrun (gloo): the date and its rendezvous port, which all its workers share.
    - mpirun (also under horovodrun --mpi): the date and the job's PMIx namespace.
    - otherwise: the start time, kept in the environment variable RUN_ID: the value stays
      the same when the config is resolved again, and the processes that Lightning's
      launcher starts inherit it.
    """
    env = os.environ
    if "SLURM_ARRAY_JOB_ID" in env:
        return f"slurm-{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    if "SLURM_JOB_ID" in env:
        return f"slurm-{env['SLURM_JOB_ID']}"
    if "TORCHELASTIC_RUN_ID" in env:
        run_id = env["TORCHELASTIC_RUN_ID"]
        return f"torchrun-{os.getppid() if run_id == 'none' else run_id}"
    if "HOROVOD_GLOO_RENDEZVOUS_PORT" in env:
        return f"horovod-{datetime.now():%Y-%m-%d}-{env['HOROVOD_GLOO_RENDEZVOUS_PORT']}"
    if "PMIX_NAMESPACE" in env:
        return f"mpi-{datetime.now():%Y-%m-%d}-{env['PMIX_NAMESPACE']}"
    return env.setdefault("RUN_ID", datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))


def hydra_output_subdir() -> str | None:
    """Only rank 0 saves the composed config (`.hydra/`); the others would write the same files."""
    return ".hydra" if global_rank() == 0 else None


def register_resolvers() -> None:
    """Make the functions above usable in the YAML configs as `${run_id:}` etc."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("default_run_id", default_run_id, replace=True)
    OmegaConf.register_new_resolver("hydra_output_subdir", hydra_output_subdir, replace=True)
    OmegaConf.register_new_resolver("slurm_job", _slurm_job, replace=True)


def _slurm_job(key: str, *, _root_):
    """`${slurm_job:KEY}`: sbatch options of a sweep point (slurm/sweep.py, read only by sweeps)."""
    from ..slurm.sweep import slurm_job

    return slurm_job(key, _root_=_root_)
