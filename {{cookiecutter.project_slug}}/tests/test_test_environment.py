"""The environment the tests give train.py: a launcher's rank and size variables go, the
site's settings stay. On a GPU machine that sets `OMPI_MCA_plm=isolated`, dropping it made
Open MPI's start fail in every test once mpi4py was installed (Lightning starts MPI then)."""

from pathlib import Path

from tests.helpers import PROJECT, project_env

LAUNCHERS = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "RUN_ID": "outer-run",
    "RESTART_COMMAND": "sbatch job.sh",
    "SLURM_PROCID": "1",
    "SLURM_NTASKS": "2",
    "SLURM_JOB_ID": "7",
    "TORCHELASTIC_RESTART_COUNT": "1",
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "PMI_RANK": "1",
    "PMIX_RANK": "1",
    "HOROVOD_RANK": "1",
    "HOROVOD_SIZE": "2",
}

SITE = {
    "OMPI_MCA_plm": "isolated",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "PMIX_MCA_gds": "hash",
    "SLURM_CONF": "/etc/slurm/site.conf",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "HOROVOD_GPU_OPERATIONS": "NCCL",
    "CUDA_VISIBLE_DEVICES": "0",
    "NCCL_DEBUG": "WARN",
}


def test_only_rank_and_size_variables_are_dropped(monkeypatch):
    for name, value in {**LAUNCHERS, **SITE}.items():
        monkeypatch.setenv(name, value)
    env = project_env()
    assert [name for name in LAUNCHERS if name in env] == []
    assert {name: env.get(name) for name in SITE} == SITE


def test_every_gpu_only_test_carries_the_cuda_mark():
    """`pytest -m cuda` runs the GPU-only tests first on a GPU machine's short lease: a test
    that skips without a GPU by its own skipif would be left out."""
    unmarked = [
        path.name
        for path in (PROJECT / "tests").glob("test_*.py")
        if path.name != Path(__file__).name and "skipif(not torch.cuda.is_available()" in path.read_text()
    ]
    assert unmarked == [], f"use tests.helpers.needs_cuda in {unmarked}"
