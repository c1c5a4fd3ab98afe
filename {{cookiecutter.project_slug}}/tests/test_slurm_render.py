"""The sbatch renderer: scripts/ in sync, every profile's script passes shellcheck, the
cluster facts land on the right #SBATCH lines, and the cluster is picked automatically."""

import os
import signal
import subprocess
import sys
import time

import pytest
from hydra import compose, initialize_config_dir

from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
from {{ cookiecutter.package_name }}.slurm.__main__ import main as slurm_main
from {{ cookiecutter.package_name }}.slurm.profiles import (
    ProfileError,
    add_detected_cluster,
    choices,
    detect_cluster,
    load,
)
from {{ cookiecutter.package_name }}.slurm.render import (
    LAUNCHERS,
    MPI_LAUNCHERS,
    SCRIPTS,
    Job,
    default_scripts,
    job_options,
    render,
)

from tests.helpers import PROJECT

SLURM_CLUSTERS = [name for name in choices("cluster") if load("cluster", name).get("slurm") is not None]
# DDP under the launchers that start any strategy; Horovod (its ranks meet through MPI) under
# those that start MPI ranks (horovodrun starts only Horovod).
STRATEGY_LAUNCHERS = [("ddp", name) for name in LAUNCHERS if name != "horovodrun"] + [
    ("horovod", name) for name in MPI_LAUNCHERS
]


def script(cluster: str, **job) -> str:
    return render(Job(load("cluster", cluster), **{"strategy": "ddp", **job}))


def sbatch_lines(text: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH")]


def test_scripts_are_in_sync_with_the_renderer():
    for name, text in default_scripts().items():
        fix = "python -m {{ cookiecutter.package_name }}.slurm --write-scripts"
        assert (PROJECT / "scripts" / name).read_text() == text, (
            f"scripts/{name} differs from its profile: run `{fix}` (and commit the result)"
        )


def test_every_rendered_script_passes_shellcheck(shellcheck, tmp_path):
    paths = []
    for cluster in SLURM_CLUSTERS:
        for strategy, launcher in STRATEGY_LAUNCHERS:
            for name, (nodes, gpus) in SCRIPTS.items():
                path = tmp_path / f"{cluster}-{strategy}-{launcher}-{name}"
                path.write_text(script(cluster, strategy=strategy, launcher=launcher, nodes=nodes, gpus_per_node=gpus))
                paths.append(str(path))
    result = subprocess.run([shellcheck, *paths, *map(str, (PROJECT / "scripts").glob("*.sh"))], capture_output=True)
    assert result.returncode == 0, result.stdout.decode()


@pytest.mark.parametrize("cluster", SLURM_CLUSTERS)
def test_every_script_has_the_promised_safety_lines(cluster):
    for strategy, launcher in STRATEGY_LAUNCHERS:
        text = script(cluster, strategy=strategy, launcher=launcher, nodes=2)
        assert "set -euo pipefail" in text
        assert "--requeue" in sbatch_lines(text)
        assert any(line.startswith("--signal=") and line.endswith("USR1@90") for line in sbatch_lines(text))
        assert "MASTER_PORT=$((20000 + SLURM_JOB_ID % 40000))" in text
        assert 'echo "Job $SLURM_JOB_ID' in text
        if launcher != "horovodrun":
            assert "srun --kill-on-bad-exit=1" in text
        assert '"$@"' in text  # the script's arguments reach train.py


def test_a_script_run_without_sbatch_says_so_in_one_line(tmp_path):
    """`bash scripts/run-gpu1.sh` stopped with "SLURM_SUBMIT_DIR: unbound variable" (in an
    allocation: SLURM_CPUS_PER_TASK), which never said to submit it."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    for extra in ({}, {"SLURM_JOB_ID": "7", "SLURM_SUBMIT_DIR": str(tmp_path)}):  # by hand; in salloc without -c
        ran = subprocess.run(
            ["bash", str(PROJECT / "scripts" / "run-gpu1.sh"), "trainer.max_epochs=1"],
            cwd=tmp_path, env=env | extra, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 2 and ran.stdout == "", ran.stderr
        (line,) = ran.stderr.splitlines()
        assert line.endswith("a Slurm batch script, whose #SBATCH lines only sbatch reads: submit it with sbatch "
                             f"{PROJECT / 'scripts' / 'run-gpu1.sh'} [train.py overrides]"), line  # fmt: skip
        assert not list(tmp_path.iterdir())


# Stand-ins for Slurm's commands, for a batch script run by bash: `srun` is the launcher (it
# notes its start, then ends with $LAUNCHER_EXIT after $LAUNCHER_SECONDS); `scontrol requeue`
# takes $REQUEUE_SECONDS and ends with $REQUEUE_EXIT, as Slurm refuses a job of --no-requeue.
FAKE_SLURM = {
    "srun": 'touch "$SLURM_SUBMIT_DIR/launched"; sleep "$LAUNCHER_SECONDS"; exit "$LAUNCHER_EXIT"',
    "scontrol": """case $1 in
    requeue) sleep "$REQUEUE_SECONDS"
             ((REQUEUE_EXIT == 0)) || echo "scontrol: error: Requested operation is presently disabled" >&2
             exit "$REQUEUE_EXIT" ;;
    show) [[ $2 != hostnames ]] || echo node1 ;;
esac""",
}


@pytest.mark.parametrize(
    ("requeue_seconds", "requeue_exit", "launcher_exit", "said"),
    [(0, 1, 0, "SIGUSR1: job 5 was not requeued (scontrol said why): at the time limit the ranks save"),
     (1.5, 0, 7, "SIGUSR1: requeueing job 5")],
    ids=["requeue-refused", "launcher-ends-during-the-trap"],
)  # fmt: skip
def test_a_batch_shell_ends_as_its_launcher_did_whatever_its_signal_traps_meet(
    tmp_path, requeue_seconds, requeue_exit, launcher_exit, said
):
    """The batch shell of launcher=torchrun (or horovodrun) requeues the job on SIGUSR1. A refused
    requeue (a job of --no-requeue) ended the shell at once under `set -e` (exit 1, the job FAILED
    and its ranks killed 90 s before the time limit's save); a launcher that ended while the trap
    ran left the trap's status (138), not the launcher's, as the job's exit code."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in FAKE_SLURM.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{text}\n")
        (bin_dir / name).chmod(0o755)
    path = tmp_path / "job.sh"
    path.write_text(script("localslurm", launcher="torchrun"))
    slurm = dict(SLURM_JOB_ID="5", SLURM_CPUS_PER_TASK="2", SLURM_SUBMIT_DIR=str(tmp_path), SLURM_JOB_NAME="job",
                 SLURM_JOB_NODELIST="node1", SLURM_JOB_NUM_NODES="1")  # fmt: skip
    timing = dict(REQUEUE_SECONDS=str(requeue_seconds), REQUEUE_EXIT=str(requeue_exit), LAUNCHER_SECONDS="1",
                  LAUNCHER_EXIT=str(launcher_exit))  # fmt: skip
    env = {**os.environ, **slurm, **timing, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    shell = subprocess.Popen(["bash", str(path)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "launched").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    shell.send_signal(signal.SIGUSR1)  # what Slurm sends the batch shell 90 s before the time limit
    stdout, _ = shell.communicate(timeout=30)
    assert shell.returncode == launcher_exit, stdout
    assert said in stdout.splitlines(), stdout


def test_cluster_facts_reach_the_header():
    puhti = sbatch_lines(script("puhti", nodes=2))
    account = [f"--account={name}" for name in [{{ cookiecutter.slurm_account | py_string }}] if name]  # '': none
    assert puhti[1 : 3 + len(account)] == [*account, "--partition=gpu", "--nodes=2"]
    assert {"--ntasks-per-node=4", "--cpus-per-task=10", "--mem=0", "--gres=gpu:v100:4,nvme:100"} <= set(puhti)

    assert "--partition=gpusmall" in sbatch_lines(script("mahti", gpus_per_node=2))  # at most 2 GPUs
    assert "--partition=gpumedium" in sbatch_lines(script("mahti", gpus_per_node=3))
    assert "--partition=gputest" in sbatch_lines(script("mahti", test=True))

    lumi = script("lumi", nodes=2)
    assert {"--partition=standard-g", "--gpus-per-node=8", "--ntasks-per-node=8", "--cpus-per-task=7"} <= set(
        sbatch_lines(lumi)
    )
    assert "--cpu-bind=mask_cpu:" in lumi and "MIOPEN_USER_DB_PATH" in lumi and "NCCL_SOCKET_IFNAME" in lumi
    lumi_one = script("lumi", gpus_per_node=1)
    assert "--partition=small-g" in sbatch_lines(lumi_one) and "--cpu-bind" not in lumi_one  # masks need whole nodes
    # parts of up to 4 nodes: small-g, billed for what they take (standard-g bills whole nodes)
    assert "--partition=small-g" in sbatch_lines(script("lumi", nodes=2, gpus_per_node=4))
    assert "--partition=standard-g" in sbatch_lines(script("lumi", nodes=5, gpus_per_node=4))
    assert "--partition=gputest" in sbatch_lines(script("puhti", nodes=2, test=True))  # Puhti's takes 2 nodes

    assert "--gpus-per-node=v100:2" in sbatch_lines(script("palmetto"))
    assert "WANDB_MODE=offline" in script("puhti") and "WANDB_MODE=offline" not in script("palmetto")


def test_launchers_split_the_node_differently():
    srun = script("puhti", nodes=2)
    assert "--ntasks-per-node=4" in sbatch_lines(srun) and "cluster.devices=4 cluster.num_nodes" not in srun
    assert "train.py cluster=puhti strategy=ddp cluster.num_nodes=2 cluster.devices=4" in srun

    torchrun = script("puhti", nodes=2, launcher="torchrun")
    assert {"--ntasks-per-node=1", "--cpus-per-task=40", "--signal=B:USR1@90"} <= set(sbatch_lines(torchrun))
    assert "--nproc_per_node=4" in torchrun and "--rdzv_backend=c10d" in torchrun
    assert "python -m {{ cookiecutter.package_name }}.torchrun " in torchrun  # exits 143 on SIGTERM, not 1
    assert "OMP_NUM_THREADS=$((SLURM_CPUS_PER_TASK / 4))" in torchrun
    assert "scontrol requeue" in torchrun and "RESUME=(ckpt_path=last)" in torchrun

    horovod = script("puhti", strategy="horovod", nodes=2, launcher="horovodrun")
    launched = 'python -m {{ cookiecutter.package_name }}.horovodrun -np "$SLURM_NTASKS"'
    assert launched in horovod  # the project's horovodrun: waits for a stop's save
    assert "--ntasks-per-node=4" in sbatch_lines(horovod)


def test_mpi_strategies_get_the_clusters_mpi_interface_under_srun():
    horovod = script("puhti", strategy="horovod", nodes=2)
    assert "srun --kill-on-bad-exit=1" in horovod and " --mpi=pmix " in horovod
    assert "--ntasks-per-node=4" in sbatch_lines(horovod)  # one task per GPU, as for DDP
    assert "--mpi" not in script("puhti", nodes=2)  # DDP meets at its own rendezvous
    assert " --mpi=cray_shasta " in script("lumi", strategy="horovod")  # Cray MPICH
    assert "--mpi" not in script("puhti", strategy="horovod", launcher="horovodrun")
    cluster_default = load("cluster", "puhti", overrides=["slurm.mpi=null"])  # the cluster's MpiDefault
    assert "--mpi" not in render(Job(cluster_default, "horovod"))
    with pytest.raises(ProfileError, match="strategy=horovod starts its ranks through MPI: use launcher=srun or"):
        Job(load("cluster", "puhti"), "horovod", launcher="torchrun")


def test_impossible_jobs_are_refused_with_the_choices():
    with pytest.raises(ProfileError, match="a puhti node has 4"):
        Job(load("cluster", "puhti"), "ddp", gpus_per_node=8)
    with pytest.raises(ProfileError, match="has no Slurm"):
        Job(load("cluster", "local"), "ddp")
    with pytest.raises(ProfileError, match="choose one of: generic, local"):
        load("cluster", "nowhere")


def test_command_line_prints_writes_and_checks_overrides(tmp_path, capsys):
    assert slurm_main(["cluster=mahti", "nodes=2", "cluster.slurm.time=12:00:00", "--", "trainer.max_epochs=5"]) == 0
    printed = capsys.readouterr().out
    assert "#SBATCH --time=12:00:00" in printed and "trainer.max_epochs=5" in printed
    out = tmp_path / "job.sh"
    assert slurm_main(["cluster=lumi", "strategy=deepspeed", "-o", str(out)]) == 0
    assert "strategy=deepspeed" in out.read_text()
    assert slurm_main(["cluster=puhti", "cluster.slurm.tme=1"]) == 2
    refused = capsys.readouterr().err
    assert "cluster.slurm.tme=1: cluster.slurm has no key tme" in refused and "Fix: cluster.slurm.time=1 (" in refused


def test_a_profiles_extra_sbatch_options_reach_the_script(capsys):
    extras = ["+cluster.slurm.sbatch.qos=normal", "+cluster.slurm.sbatch.constraint=a100|h100"]
    assert slurm_main(["cluster=puhti", *extras, "+cluster.slurm.sbatch.exclusive=null"]) == 0
    header = [line for line in capsys.readouterr().out.splitlines() if line.startswith("#SBATCH")]
    assert {"#SBATCH --qos=normal", "#SBATCH --constraint=a100|h100", "#SBATCH --exclusive"} <= set(header)
    assert "#SBATCH --signal=SIGUSR1@90" in header and "#SBATCH --requeue" in header  # still the script's own


def test_profile_overrides_take_each_of_hydras_signs(capsys):
    """+ adds a key, ++ adds or sets one, ~ removes one (++ was read as a key named +slurm)."""
    overrides = ["+cluster.slurm.env.ADDED=1", "++cluster.slurm.env.FORCED=2", "++cluster.slurm.time=02:00:00"]
    assert slurm_main(["cluster=puhti", *overrides, "~cluster.slurm.env.NCCL_DEBUG"]) == 0
    printed = capsys.readouterr().out
    assert 'export ADDED="1"' in printed and 'export FORCED="2"' in printed and "#SBATCH --time=02:00:00" in printed
    assert "export NCCL_DEBUG" not in printed


def test_a_profiles_training_keys_given_here_reach_train_py(capsys):
    """cluster.precision=32-true rendered a script that named only cluster=puhti: the job trained in
    puhti's 16-mixed. The job's size (gpus=, nodes=) and its Slurm settings stay the renderer's."""
    given = ["cluster.precision=32-true", "cluster.internet=true", "cluster.slurm.time=02:00:00", "gpus=2"]
    assert slurm_main(["cluster=puhti", *given, "--", "trainer.max_epochs=5"]) == 0
    printed = capsys.readouterr().out
    assert 'cluster.devices=2 cluster.precision=32-true trainer.max_epochs=5 "$@"' in printed
    assert "WANDB_MODE=offline" not in printed  # cluster.internet: the script's own
    assert slurm_main(["cluster=puhti", "cluster.precision=bogus"]) == 2  # checked as train.py checks it
    assert "precision=bogus: one of 32-true, 16-mixed" in capsys.readouterr().err


def test_python_dash_m_works():
    result = subprocess.run(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}.slurm", "cluster=narvi", "gpus=1"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": os.pathsep.join([str(PROJECT / "src"), os.environ.get("PYTHONPATH", "")]), "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --gres=gpu:1" in result.stdout


def test_cluster_is_detected_from_slurm_or_the_host_name():
    assert detect_cluster({"SLURM_CLUSTER_NAME": "lumi"}, hostnames=["x"]) == ("lumi", "SLURM_CLUSTER_NAME=lumi")
    assert detect_cluster({}, hostnames=["mahti-login11.mahti.csc.fi"])[0] == "mahti"
    assert detect_cluster({}, hostnames=["puhti-login12"])[0] == "puhti"
    assert detect_cluster({}, hostnames=["my-laptop"]) is None


def test_an_explicit_cluster_wins_over_detection(monkeypatch):
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "puhti")
    assert add_detected_cluster(["cluster=local", "trainer.max_epochs=1"]) == ["cluster=local", "trainer.max_epochs=1"]
    assert add_detected_cluster(["trainer.max_epochs=1"]) == ["cluster=puhti", "trainer.max_epochs=1"]
    # after Hydra's options: first, it made `python train.py -m seed=1,2` in a job an override before -m
    assert add_detected_cluster(["-m", "seed=1,2"]) == ["-m", "cluster=puhti", "seed=1,2"]
    assert add_detected_cluster(["--cfg", "job"]) == ["--cfg", "job", "cluster=puhti"]


@pytest.mark.parametrize("cluster", ["puhti", "lumi", "palmetto"])
def test_a_cluster_sets_the_trainer(cluster):
    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=[f"cluster={cluster}", "cluster.num_nodes=2", "output_dir=/tmp/run"])
    profile = load("cluster", cluster)
    assert cfg.trainer.accelerator == "gpu"  # also LUMI's AMD GPUs: torch sees them as CUDA devices
    assert (cfg.trainer.devices, cfg.trainer.num_nodes) == (profile["devices"], 2)


def test_profiles_are_composed_by_hydra_with_interpolations(tmp_path):
    """The renderer reads configs/ as training does: defaults lists and ${...} work in a profile."""
    import shutil

    configs = tmp_path / "configs"
    shutil.copytree(PROJECT / "configs" / "cluster", configs / "cluster")
    shutil.copytree(PROJECT / "configs" / "strategy", configs / "strategy")
    (configs / "cluster" / "mine.yaml").write_text(
        "defaults:\n  - puhti\nname: mine\ndevices: 2\n"
        "slurm:\n  cpus_per_gpu: ${oc.decode:${oc.env:MY_CPUS,5}}\n  mem_per_gpu: ${.mem}\n  mem: 8G\n"
    )
    mine = load("cluster", "mine", configs)
    text = render(Job(mine, "ddp", configs=configs))
    assert {"--partition=gpu", "--cpus-per-task=5", "--mem=0", "--gres=gpu:v100:2,nvme:100"} <= set(sbatch_lines(text))
    assert "--mem=8G" in sbatch_lines(render(Job(mine, "ddp", gpus_per_node=1, configs=configs)))
    assert load("cluster", "mine", configs, overrides=["slurm.mem=2G"])["slurm"]["mem_per_gpu"] == "2G"


def test_profiles_load_inside_a_running_hydra_app():
    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=["cluster=lumi", "output_dir=/tmp/run"])
        assert load("cluster", "puhti")["name"] == "puhti"  # its own Hydra, then this one back
        options = job_options(cfg.cluster, nodes=2)
        assert compose("train", overrides=["cluster=mahti", "output_dir=/tmp/run"]).cluster.name == "mahti"
    assert options["sbatch"]["partition"] == "standard-g" and options["sbatch"]["gpus-per-node"] == "8"


def test_job_options_are_what_the_script_asks_for():
    """The values a Hydra sweep on Slurm submits with: the same as the rendered script's."""
    puhti = load("cluster", "puhti")
    options = job_options(puhti, nodes=2, strategy="horovod")
    text = render(Job(puhti, "horovod", nodes=2))
    assert [f"--{key}" + ("" if value is None else f"={value}") for key, value in options["sbatch"].items()] == (
        sbatch_lines(text)
    )
    assert options["sbatch"]["ntasks-per-node"] == 4 and options["sbatch"]["signal"] == "SIGUSR1@90"
    assert "\n".join(options["setup"]) in text and "module load pytorch" in options["setup"]
    assert options["srun"] == ['--cpus-per-task="$SLURM_CPUS_PER_TASK"', "--mpi=pmix"]
    overrides = ["cluster=puhti", "strategy=horovod", "cluster.num_nodes=2", "cluster.devices=4"]
    assert options["train_overrides"] == overrides
    with pytest.raises(ProfileError, match="nodes=0"):
        job_options(puhti, nodes=0)
