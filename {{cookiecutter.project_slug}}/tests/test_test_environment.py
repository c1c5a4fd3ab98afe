"""The environment the tests give train.py: a launcher's rank and size variables go, the
site's settings stay. On a GPU machine that sets `OMPI_MCA_plm=isolated`, dropping it made
Open MPI's start fail in every test once mpi4py was installed (Lightning starts MPI then)."""

from tests.helpers import project_env

LAUNCHERS = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "RUN_ID": "outer-run",
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
