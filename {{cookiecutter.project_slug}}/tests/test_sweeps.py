"""Sweeps: `python train.py -m ...` on this machine, and one Slurm job per point through
Hydra's submitit launcher (configs/hydra/launcher/slurm.yaml)."""

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from {{ cookiecutter.package_name }}.callbacks.checkpoints import newest_checkpoint
from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
from {{ cookiecutter.package_name }}.slurm.profiles import choices, load
from {{ cookiecutter.package_name }}.slurm.render import Job, sbatch_header

from tests.helpers import FAST, PROJECT, as_in_a_terminal, project_env
from tests.slurm_helpers import record_starts, starts_of

SLURM_PROFILES = [name for name in choices("cluster") if load("cluster", name).get("slurm")]


def sweep_options(*overrides: str) -> dict:
    """hydra.launcher as the slurm launcher config resolves it for these overrides."""
    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=["hydra/launcher=slurm", *overrides], return_hydra_config=True)
    return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)


def sbatch_lines(job: Job) -> dict:
    return dict(re.fullmatch(r"#SBATCH --([\w-]+)=?(.*)", line).groups() for line in sbatch_header(job))


@pytest.mark.parametrize("cluster", SLURM_PROFILES)
def test_sweep_jobs_ask_slurm_for_what_the_rendered_scripts_ask(cluster):
    profile = load("cluster", cluster)
    for nodes in (1, 2):
        options = sweep_options(f"cluster={cluster}", f"cluster.num_nodes={nodes}", "strategy=ddp")
        script = sbatch_lines(Job(profile, "ddp", "srun", nodes))
        assert options["account"] == (script.get("account") or None)
        assert options["partition"] == script.get("partition")
        assert str(options["nodes"]) == script["nodes"]
        assert str(options["tasks_per_node"]) == script["ntasks-per-node"]
        assert str(options["cpus_per_task"]) == script["cpus-per-task"]
        extra = options["additional_parameters"]
        for key in ("mem", "gres", "gpus-per-node"):
            assert str(extra[key]) == script[key] if key in script else key not in extra, key
        assert extra["signal"] == script["signal"] and extra["requeue"] is True
        hours, minutes, _ = (int(part) for part in script["time"].split(":"))
        assert options["timeout_min"] == hours * 60 + minutes
        for module in profile["slurm"]["modules"]:
            assert module in options["setup"][0]


def test_a_profiles_extra_sbatch_options_reach_a_sweeps_jobs_beside_its_own():
    extra = sweep_options("cluster=puhti", "+cluster.slurm.sbatch.qos=normal")["additional_parameters"]
    assert extra["qos"] == "normal" and extra["requeue"] is True and extra["signal"] == "SIGUSR1@90"
    assert extra["gres"] == "gpu:v100:4,nvme:100"


def test_a_stopped_points_resume_command_asks_for_the_job_of_its_point():
    """The command a stopped point of a Slurm sweep names renders a job of the point's own size,
    strategy and Slurm settings. Before, it came from the sweep's options, without its
    cluster.slurm.* overrides: the resumed job asked for the profile's account and time."""
    from {{ cookiecutter.package_name }}.slurm.sweep import resume_command

    slurm = ["cluster.slurm.account=project_9", "cluster.slurm.time=12:00:00", "+cluster.slurm.env.EXTRA=a b"]
    overrides = ["cluster=puhti", "cluster.num_nodes=2", "strategy=deepspeed_stage_2", *slurm, "seed=3"]
    register_resolvers()
    as_hydra_writes_a_point = [override.replace(":", "\\:").replace(" ", "\\ ") for override in overrides]
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        point = compose("train", overrides=["hydra/launcher=slurm", *as_hydra_writes_a_point], return_hydra_config=True)
    command = shlex.split(resume_command(point))
    settings = "cluster=puhti nodes=2 gpus=4 strategy=deepspeed_stage_2 launcher=srun".split()
    assert command == ["python", "-m", "{{ cookiecutter.package_name }}.slurm", *settings, *slurm, "--submit", "--"]
    rendered = subprocess.run(
        [sys.executable, *command[1:-2]], cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=120
    )
    assert rendered.returncode == 0, rendered.stderr
    script = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", rendered.stdout, re.MULTILINE))
    options = sweep_options(*overrides)
    assert script["account"] == options["account"] == "project_9"
    assert script["time"] == "12:00:00" and options["timeout_min"] == 720
    assert script["nodes"] == str(options["nodes"]) == "2"
    assert 'export EXTRA="a b"' in rendered.stdout and 'export EXTRA="a b"' in options["setup"][0]


@pytest.mark.parametrize("launcher", ["local", "slurm"])
def test_the_sweep_launchers_are_plugins_that_hydra_finds(launcher):
    """Hydra takes launchers from its hydra_plugins package alone (src/hydra_plugins/)."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher

    target = OmegaConf.load(PROJECT / "configs" / "hydra" / "launcher" / f"{launcher}.yaml")["_target_"]
    assert target in {f"{found.__module__}.{found.__name__}" for found in Plugins.instance().discover(Launcher)}


def run_sweep(*overrides: str, env=None, timeout=600) -> subprocess.CompletedProcess:
    command = [sys.executable, "train.py", "-m", *overrides]
    return subprocess.run(
        command, cwd=PROJECT, env=env or project_env(), capture_output=True, text=True, timeout=timeout,
        preexec_fn=as_in_a_terminal,  # Ctrl-C as a terminal gives it (the stopped sweep's test), also in CI
    )  # fmt: skip


def summary_of(tmp_path) -> dict:
    (summary,) = tmp_path.glob("multirun/*/sweep_summary.yaml")
    return yaml.safe_load(summary.read_text())


def test_a_sweep_of_single_process_runs_on_this_machine(tmp_path):
    result = run_sweep(*FAST, "trainer.accelerator=cpu", f"output_root={tmp_path}", "seed=1,2")
    assert result.returncode == 0, result.stdout + result.stderr
    points = summary_of(tmp_path)["points"]
    assert [point["overrides"][-1] for point in points] == ["seed=1", "seed=2"]
    assert len({point["directory"] for point in points}) == 2
    assert all("checkpoints/last.ckpt" in point["checkpoints"] for point in points)
    assert all(point["slurm_job"] is None for point in points)  # no Slurm here (it gave the point's number)


def test_a_sweep_through_submitit_local_runs_its_points_here_side_by_side(tmp_path):
    local = ["hydra/launcher=submitit_local", "seed=1,2"]
    result = run_sweep(*FAST, "trainer.accelerator=cpu", f"output_root={tmp_path}", *local)
    assert result.returncode == 0, result.stdout + result.stderr
    points = summary_of(tmp_path)["points"]
    assert [point["state"] for point in points] == ["COMPLETED", "COMPLETED"]
    assert all("checkpoints/last.ckpt" in point["checkpoints"] for point in points)


def test_a_sweep_whose_first_point_is_refused_leaves_nothing(tmp_path):
    """Refused once its data is known (4 batches an epoch, validation every 50): one line, exit 2,
    and no sweep folder holding only Hydra's multirun.yaml."""
    output_root = f"output_root={tmp_path / 'new' / 'runs'}"  # folders made for it go too
    result = run_sweep(*FAST, "trainer.accelerator=cpu", output_root, "+trainer.val_check_interval=50,2")
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("ERROR: ")]
    assert "trainer.val_check_interval=50: more than the 4 training batches" in line, line
    assert not list(tmp_path.iterdir()), list(tmp_path.rglob("*"))


def test_a_local_sweep_names_each_point_that_did_not_finish_and_runs_the_others(tmp_path):
    """Hydra's basic launcher printed nothing when a point raised and ended with the first one's
    traceback, no summary; a point refused after the first ended the sweep (exit 2), its later
    points never run. Now (launch/local_sweep.py) each is named with the command that resumes or
    repeats it, the other points run, and the sweep ends 1 with the summary."""
    fail = ["+callbacks.fail._target_=tests.slurm_helpers.RaiseOnRank", "+callbacks.fail.step=6"]
    points = ["+trainer.val_check_interval=2,50", "+callbacks.fail.rank=null,0"]  # 50: more than 4 batches
    result = run_sweep(*FAST, f"output_root={tmp_path}", "trainer.max_epochs=2", *fail, *points)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    summary = summary_of(tmp_path)["points"]
    assert [point["state"] for point in summary] == ["COMPLETED", "FAILED", "REFUSED", "REFUSED"], summary
    assert result.stderr.count("Traceback") == 1 and "RuntimeError: a test's failure on rank 0" in result.stderr
    assert result.stderr.count("ERROR: trainer.val_check_interval=50: more than the 4 training batches") == 2
    failed, refused = summary[1], summary[2]
    assert failed["error"] == "RuntimeError: a test's failure on rank 0", failed
    resume = f"Resume: python train.py resume={failed['directory']}"
    assert f"({failed['error']}; traceback above), saved at step 4. {resume}\n" in result.stderr, output
    again = shlex.join(["python", "train.py", *refused["overrides"]])
    assert f"Point 2 refused (its line above), nothing made. Again: {again}\n" in result.stderr, output
    assert refused["directory"] is None and not (Path(summary[0]["directory"]).parent / "2").exists()
    assert "ERROR: 3 of 4 points of the sweep did not finish (above). Summary: " in result.stderr, output
    # the command it names continues the failed point (here without the failure)
    command = [sys.executable, *shlex.split(failed["continue"])[2:], "callbacks.fail.rank=null"]
    resumed = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert newest_checkpoint(Path(failed["directory"]))[1] == 8  # 2 epochs of 4 steps


def test_a_local_sweep_point_that_its_max_time_ends_is_not_completed_and_the_sweep_goes_on(tmp_path):
    """+trainer.max_time ended a point before its epochs: the sweep called it COMPLETED and exited 0."""
    slow = record_starts(tmp_path, seconds_per_step=0.5)
    limits = ["trainer.max_epochs=20", "+trainer.max_time={seconds:2}", "seed=1,2"]
    result = run_sweep(*FAST, f"output_root={tmp_path}", *limits, *slow)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    points = summary_of(tmp_path)["points"]
    assert [point["state"] for point in points] == ["TIMEOUT", "TIMEOUT"], points
    for point in points:
        resume = f"Resume: python train.py resume={point['directory']} +trainer.max_time=<a longer time for the whole"
        assert point["continue"].startswith(resume), point
        assert f"To train on: python train.py resume={point['directory']} +trainer.max_time=<a longer" in output
    assert "ERROR: 2 of 2 points of the sweep did not finish (above). Summary: " in result.stderr, output


def test_a_local_sweep_point_that_diverges_fails_and_the_sweep_goes_on(tmp_path):
    """A sweep of learning rates: the one that diverges is named as failed, the others train."""
    result = run_sweep(*FAST, f"output_root={tmp_path}", "model.optimizer.lr=1e30,1e-3")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    points = summary_of(tmp_path)["points"]
    assert [point["state"] for point in points] == ["FAILED", "COMPLETED"], points
    assert points[0]["error"].startswith("TrainingDiverged: val/loss=nan at epoch 0, step 4: the training diverged")


class SignalAtStep(pl.Callback):
    """Test-only: a signal to this process at a training step's end; step -1: as the Trainer is
    built, before training (`step=100`: never, in these short points)."""

    def __init__(self, step: int, signum: int):
        self.step, self.signum = step, signum
        if step == -1:
            os.kill(os.getpid(), signum)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.signum)


@pytest.mark.parametrize(
    ("stop_step", "signum", "code"), [(2, signal.SIGTERM, 143), (-1, signal.SIGINT, 130)], ids=["sigterm", "ctrl-c"]
)
def test_a_stopped_local_sweep_names_the_points_that_did_not_train(tmp_path, stop_step, signum, code):
    """A local sweep stopped in its second point (SIGTERM mid-point, or Ctrl-C before it trained)
    named only that point; the later ones were not named anywhere. Now each point that did not
    train has a line with its command, the summary says PENDING, and the exit code is the stop's."""
    stop = [f"+callbacks.stop._target_={__name__}.SignalAtStep", f"+callbacks.stop.signum={int(signum)}"]
    result = run_sweep(*FAST, f"output_root={tmp_path}", *stop, f"+callbacks.stop.step=100,{stop_step},100")
    output = result.stdout + result.stderr
    assert result.returncode == code, output
    assert "Traceback" not in result.stderr, output
    points = summary_of(tmp_path)["points"]
    pending = [point for point in points if point["state"] == "PENDING"]
    expected = [2] if stop_step > 0 else [1, 2]
    assert points[0]["state"] == "COMPLETED" and [point["num"] for point in pending] == expected, points
    for point in pending:
        again = shlex.join(["python", "train.py", *point["overrides"]])
        assert point["continue"] == f"Again: {again}", point
        assert f"Point {point['num']} did not train. Again: {again}\n" in result.stderr, output
    if stop_step > 0:
        assert points[1]["state"] == "STOPPED" and points[1]["continue"].startswith("Resume: python train.py resume=")
        assert f"Stopped by SIGTERM at step 2: saved {points[1]['directory']}" in result.stderr, output
    else:
        assert not (Path(points[0]["directory"]).parent / "1").exists()  # train.py removed the start
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"The sweep was stopped (exit {code}): {len(pending)} of 3 points did not train"), last


def test_a_second_sweep_in_one_slurm_job_is_refused_with_a_folder_of_its_own_as_the_fix(tmp_path):
    """In a batch job a sweep's folder is the job's (slurm-<job>, which a requeue finds again): a
    second sweep of the same job would train into the first's points, and is refused before Hydra
    rewrites the first's multirun.yaml; the same sweep again (not requeued) at its first point."""
    env = {**project_env(), "SLURM_JOB_ID": "99", "ENVIRONMENT": "BATCH"}  # as in a batch script
    first = run_sweep(*FAST, f"output_root={tmp_path}", "seed=1,2", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    sweep = tmp_path / "multirun" / "slurm-99"
    assert [path.name for path in sweep.parent.iterdir()] == ["slurm-99"]
    record = (sweep / "multirun.yaml").read_text()
    (sweep.parent / "slurm-99-2").mkdir()  # taken: the fix names the next free folder
    for points in ("seed=3,4", "seed=1,2"):
        second = run_sweep(*FAST, f"output_root={tmp_path}", points, env=env)
        assert second.returncode == 2, second.stdout + second.stderr
        (line,) = [line for line in second.stderr.splitlines() if line.startswith("ERROR: ")]
        assert line.endswith(f"a folder of its own: hydra.sweep.dir={sweep}-3"), line
        assert ("holds another sweep (" in line and "seed=1,2" in line) == (points == "seed=3,4"), line
        assert (sweep / "multirun.yaml").read_text() == record
    assert [point["overrides"][-1] for point in summary_of(tmp_path)["points"]] == ["seed=1", "seed=2"]


def test_two_sweeps_started_in_one_second_get_their_own_directories(tmp_path):
    """The sweep directory was named by the second alone: two sweeps started together trained their
    points into the same folders. It now holds the process id too, as a single run's does."""
    script = (
        "import os\n"
        "from hydra import compose, initialize_config_dir\n"
        "from {{ cookiecutter.package_name }}.launch.environment import register_resolvers\n"
        "register_resolvers()\n"
        "with initialize_config_dir(config_dir=os.path.abspath('configs'), version_base='1.3'):\n"
        "    cfg = compose('train', overrides=['output_root=out'], return_hydra_config=True)\n"
        "print(os.getpid(), cfg.hydra.sweep.dir)\n"
    )
    env = {key: value for key, value in project_env().items() if key != "RUN_ID"}
    result = subprocess.run([sys.executable, "-c", script], cwd=PROJECT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    pid, directory = result.stdout.split()
    assert re.fullmatch(rf"out/multirun/\d\d\d\d-\d\d-\d\d_\d\d-\d\d-\d\d_{pid}", directory), directory


GPUS = torch.cuda.device_count()


@pytest.mark.parametrize(
    ("accelerator", "devices", "processes"),
    [
        ("cpu", "2", 2),
        # every GPU: counted as 1 process, and each DDP rank would have run the whole sweep
        pytest.param("gpu", "-1", GPUS, marks=[pytest.mark.cuda, pytest.mark.skipif(GPUS < 2, reason="2 GPUs")]),
    ],
)
def test_a_multi_process_sweep_on_this_machine_is_refused_with_the_reason(tmp_path, accelerator, devices, processes):
    common = [*FAST, f"trainer.accelerator={accelerator}", f"trainer.devices={devices}", f"output_root={tmp_path}"]
    result = run_sweep(*common, "seed=1,2")
    assert result.returncode == 2
    assert f"multirun with {processes} processes (trainer.devices; trainer.devices={devices} x" in result.stderr
    assert "Fix: submit one Slurm job per point (-m hydra/launcher=slurm" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.rglob("*.ckpt"))


SLURM_SWEEP = [*FAST, "hydra/launcher=slurm", "cluster=localslurm", "cluster.num_nodes=2", "strategy=ddp"]


def fake_sbatch(directory, says: str, code: int) -> str:
    """A PATH whose sbatch prints `says` and exits with `code` (as a cluster refusing an account does)."""
    directory.mkdir()
    script = directory / "sbatch"
    script.write_text(f"#!/bin/sh\necho '{says}' >&2\nexit {code}\n")
    script.chmod(0o755)
    return f"{directory}:{os.environ['PATH']}"


REFUSED = "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"


def test_a_slurm_sweep_that_sbatch_refuses_stops_with_one_line_before_anything(tmp_path):
    """sbatch --test-only judges each point's job first: before, submitit's traceback at submission."""
    env = {**project_env(), "PATH": fake_sbatch(tmp_path / "bin", REFUSED, 1)}
    result = run_sweep(*SLURM_SWEEP, f"output_root={tmp_path / 'outputs'}", "seed=1,2", env=env, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ERROR: hydra/launcher=slurm: sbatch --test-only refuses the points' jobs ({REFUSED})")
    assert "Fix: the profile's account and partition" in line
    assert not (tmp_path / "outputs").exists()


def test_a_slurm_sweep_whose_submission_sbatch_refuses_stops_with_one_line_and_no_files(tmp_path):
    """--test-only took the jobs, then sbatch refused the submission (a limit reached meanwhile):
    before, submitit's traceback, and the sweep's folder kept multirun.yaml and submitit's files."""
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    says = "sbatch: error: QOSMaxSubmitJobPerUserLimit"
    fake.write_text(f'#!/bin/sh\ncase "$*" in *--test-only*) exit 0;; esac\necho "{says}" >&2\nexit 1\n')
    fake.chmod(0o755)
    env = {**project_env(), "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    result = run_sweep(*SLURM_SWEEP, f"output_root={tmp_path / 'outputs'}", "seed=1,2", env=env, timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ERROR: sbatch refused the sweep's jobs: {says}. Fix: what sbatch names"), line
    assert not (tmp_path / "outputs").exists()


def on_puhti(*overrides: str) -> list[str]:
    """A Slurm sweep of two points on Puhti, with these overrides."""
    return ["-m", "hydra/launcher=slurm", "cluster=puhti", *overrides, "seed=1,2"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["hydra/launcher=slurm", "cluster=puhti"], "hydra/launcher=slurm: Hydra's launchers run sweeps (-m); without"),
        (["-m", "hydra/launcher=slurm", "cluster=local", "seed=1,2"], "launcher=slurm: cluster=local has no Slurm"),
        # its jobs: 1 task, 60 minutes, no GPUs, account or requeue
        (
            ["-m", "hydra/launcher=submitit_slurm", "cluster=puhti", "seed=1,2"],
            "hydra/launcher=submitit_slurm: the submitit plugin's own settings ask Slurm for none of the cluster "
            "profile's (GPUs, account, time, memory, the requeue before the time limit). Fix: hydra/launcher=slurm",
        ),
        # Hydra's submitit launcher submits every point with the sweep's options: a 1-node job for both
        (
            on_puhti("cluster.num_nodes=1,2"),
            "hydra/launcher=slurm: the points ask for 2 kinds of job (--nodes 1 and 2), and Hydra's submitit launcher "
            "submits every point of a sweep as one. Fix: a sweep for each kind, each with one value of what changes "
            "the job (swept here: cluster.num_nodes=1,2 seed=1,2)",
        ),
        # the job's time, but not the time that sbatch --test-only judged, nor a resumed point's
        (
            on_puhti("hydra.launcher.timeout_min=1500"),
            "hydra.launcher.timeout_min=1500: the cluster profile sets each sweep job's timeout_min, so that its "
            "check and a resumed point's job ask for the same. Fix: cluster.slurm.time=1-01:00:00",
        ),
        # submitit would have asked for its default time, 5 minutes
        (
            on_puhti("cluster.slurm.partition=long", "cluster.slurm.time=UNLIMITED"),
            "hydra/launcher=slurm: cluster.slurm.time=UNLIMITED: a sweep's jobs need a time limit",
        ),
        # replaced every #SBATCH option the profile gives: no GPUs, memory or requeue signal
        (on_puhti("+hydra.launcher.additional_parameters.qos=x"), "Fix: +cluster.slurm.sbatch.qos=x"),
        # (without the +: "no such key", whose fix, the +, led to the case above)
        (on_puhti("hydra.launcher.additional_parameters.qos=x"), "Fix: +cluster.slurm.sbatch.qos=x"),
        # submitit's own Slurm options: beside the profile's, unchecked; an unknown one met submitit's NameError
        (
            on_puhti("+hydra.launcher.mail_type=END"),
            "+hydra.launcher.mail_type=END: the cluster profile sets each sweep job's mail_type, so that its check "
            "and a resumed point's job ask for the same. Fix: +cluster.slurm.sbatch.mail-type=END",
        ),
        (on_puhti("hydra.launcher.mail_type=END"), "Fix: +cluster.slurm.sbatch.mail-type=END"),
        # submitit's settings of its own: a wrong value met a traceback at submission
        (
            on_puhti("hydra.launcher.array_parallelism=abc"),
            "hydra.launcher.array_parallelism=abc: submitit's array_parallelism takes a whole number, 1 or more. "
            "Fix: hydra.launcher.array_parallelism=<value>",
        ),
        (on_puhti("hydra.launcher.stderr_to_stdout=maybe"), "submitit's stderr_to_stdout takes true or false"),
        # named gpus=[0,1], which nobody typed (-1 and auto: a whole node, below)
        (on_puhti("trainer.devices=[0,1]"), "trainer.devices=[0, 1]: a point's job takes a node's GPUs by number. Fi"),
        # submitit's requeue, which the jobs leave to callbacks/requeue.py: changing it changed nothing
        (
            on_puhti("hydra.launcher.max_num_timeout=3"),
            "hydra.launcher.max_num_timeout=3: a sweep's jobs do not requeue through submitit",
        ),
    ],
)
def test_a_slurm_sweep_that_cannot_be_submitted_stops_with_one_line(overrides, message, tmp_path, monkeypatch):
    from {{ cookiecutter.package_name }}.launch.command_line import check_arguments
    from {{ cookiecutter.package_name }}.launch.errors import SetupError

    monkeypatch.setenv("PATH", fake_sbatch(tmp_path / "bin", "Job 1 to start", 0))
    with pytest.raises(SetupError, match=re.escape(message)):
        check_arguments([*overrides, f"output_root={tmp_path}"])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no sbatch at all
    with pytest.raises(SetupError, match=r"submits each point with sbatch, which is not on this machine"):
        check_arguments(["-m", "hydra/launcher=slurm", "cluster=puhti", "seed=1,2", f"output_root={tmp_path}"])


def test_a_slurm_sweep_may_change_submitits_own_settings(tmp_path, monkeypatch):
    from {{ cookiecutter.package_name }}.launch.command_line import check_arguments

    monkeypatch.setenv("PATH", fake_sbatch(tmp_path / "bin", "Job 1 to start", 0))
    own = ["hydra.launcher.array_parallelism=4", "hydra.launcher.stderr_to_stdout=false", "hydra.launcher.name=lr"]
    check_arguments(["-m", "hydra/launcher=slurm", "cluster=puhti", *own, "seed=1,2", f"output_root={tmp_path}"])
    for every_gpu in ("trainer.devices=-1", "trainer.devices=auto"):  # as many as a node has: 4 tasks per node
        check_arguments([*on_puhti(every_gpu), f"output_root={tmp_path}"])
    assert sweep_options("cluster=puhti", *own)["array_parallelism"] == 4


def last_step(checkpoint) -> int:
    return torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"]


def test_a_sweep_of_two_node_jobs_runs_one_job_per_point(local_slurm, tmp_path):
    result = run_sweep(*SLURM_SWEEP, f"output_root={tmp_path}", "seed=1,2", env=local_slurm.env())
    assert result.returncode == 0, result.stdout + result.stderr
    points = summary_of(tmp_path)["points"]
    assert len(points) == 2 and len({point["slurm_job"] for point in points}) == 2
    for point in points:
        assert point["state"] == "COMPLETED", point
        task_logs = list(tmp_path.glob(f"multirun/*/.submitit/{point['slurm_job']}/*_log.out"))
        members = set(re.findall(r"MEMBER: (\d)/4", "".join(path.read_text() for path in task_logs)))
        assert len(task_logs) == 4 and members == {"1", "2", "3", "4"}, task_logs  # 2 nodes x 2 tasks


def start_slow_sweep(local_slurm, tmp_path, epochs: int, *overrides: str, seeds="1") -> tuple[subprocess.Popen, str]:
    """A sweep of a point per seed on 2 nodes x 2 ranks (2 steps an epoch, 0.25 s a step), returned
    with the job id of its first point once that has written its first checkpoint."""
    sweep = subprocess.Popen(
        [
            sys.executable,
            "train.py",
            "-m",
            *SLURM_SWEEP,
            *overrides,
            f"output_root={tmp_path}",
            f"seed={seeds}",
            f"trainer.max_epochs={epochs}",
            *record_starts(tmp_path / "starts", seconds_per_step=0.25),
        ],
        cwd=PROJECT,
        env=local_slurm.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=as_in_a_terminal,  # for the Ctrl-C test
    )
    try:
        local_slurm.wait_for(
            lambda: any(tmp_path.glob("multirun/*/0/checkpoints/last.ckpt")), "the sweep job wrote no checkpoint", 300
        )
    except AssertionError:
        sweep.kill()
        raise
    jobs = {path.name for path in tmp_path.glob("multirun/*/.submitit/[0-9]*")}  # one point: no array
    (job_id,) = jobs if len(jobs) == 1 else [job for job in jobs if job.endswith("_0")]
    return sweep, job_id


@pytest.mark.parametrize(
    "requeue",
    [
        # the time limit's SIGUSR1: the ranks save, and callbacks/requeue.py requeues the job
        ("scancel", "--signal=USR1"),
        # Slurm's own requeue (preemption, or a failed node): no signal to save on first
        ("scontrol", "requeue"),
    ],
    ids=["sigusr1", "slurm"],
)
def test_a_requeued_sweep_job_continues_its_point(local_slurm, tmp_path, requeue):
    """The point's job starts again with its id and continues the point from its newest
    checkpoint; the sweep, which waited, ends with the point's result. Signalled mid-training:
    after the first checkpoint, with ~5 s of steps left (the ranks agree on SIGUSR1 about once a
    second; signalled at the start of a short run, the job could end before that agreement)."""
    sweep, job_id = start_slow_sweep(local_slurm, tmp_path, epochs=12)  # ~6 s of training
    try:
        local_slurm.command(*requeue, job_id)
        local_slurm.release_requeued(job_id)
        output, _ = sweep.communicate(timeout=600)
    finally:
        sweep.kill()
    assert sweep.returncode == 0, output
    first, second = starts_of(tmp_path / "starts")
    assert first == (0, 0) and second[1] > 0, (first, second)  # the second start resumed
    (point,) = summary_of(tmp_path)["points"]
    assert point["state"] == "COMPLETED" and newest_checkpoint(Path(point["directory"]))[1] == 24, point


def test_a_requeued_job_that_sweeps_on_its_node_continues_the_sweep(local_slurm, tmp_path):
    """`python train.py -m ...` in a batch script of one's own, the job requeued by Slurm (a node
    failure: the step killed, no signal to save on). The sweep's folder was named by its start
    time, so the requeued job began every point again, from scratch, in a new folder. Now it is
    named by the job: the finished point ends at once, the stopped one resumes."""
    script = tmp_path / "sweep.sh"
    script.write_text('#!/bin/bash\n#SBATCH --nodes=1 --ntasks=1 --requeue\nsrun python train.py -m "$@"\n')
    points = [f"output_root={tmp_path}", "cluster.devices=1", "trainer.max_epochs=4", "seed=1,2"]
    slow = record_starts(tmp_path / "starts", seconds_per_step=1)  # both points' starts, in order
    job_id = local_slurm.submit(script, *FAST, *points, *slow, sbatch_options=(f"--partition={local_slurm.partition}",))
    sweep = tmp_path / "multirun" / f"slurm-{job_id}"
    stopped = sweep / "1" / "checkpoints" / "last.ckpt"  # the second point's first epoch: 4 of its 16 steps
    running = ("PENDING", "RUNNING")
    local_slurm.wait_for(lambda: stopped.exists() or local_slurm.job(job_id)["JobState"] not in running, "", 300)
    assert stopped.exists(), local_slurm.log(script, job_id)
    assert local_slurm.kill_step(job_id) == 1
    local_slurm.wait(job_id, timeout=120)
    local_slurm.command("scontrol", "requeue", job_id)
    local_slurm.release_requeued(job_id)
    info = local_slurm.wait(job_id, timeout=600)
    log = local_slurm.log(script, job_id)
    assert info["JobState"] == "COMPLETED", log
    assert list((tmp_path / "multirun").iterdir()) == [sweep], log
    # the first point not trained again ("nothing left to do"), the second resumed
    *started, resumed = starts_of(tmp_path / "starts")
    assert started == [(0, 0), (0, 0)] and resumed[1] >= 4, starts_of(tmp_path / "starts")
    assert "Restarted after the training had ended" in log
    points = yaml.safe_load((sweep / "sweep_summary.yaml").read_text())["points"]
    assert [point["state"] for point in points] == ["COMPLETED", "COMPLETED"], points
    assert newest_checkpoint(sweep / "1")[1] == 16


def test_ctrl_c_on_a_slurm_sweep_says_that_its_jobs_run_on(local_slurm, tmp_path):
    """It said `Stopped by Ctrl-C`, as if the sweep had stopped, while its jobs trained on."""
    sweep, job_id = start_slow_sweep(local_slurm, tmp_path, 400)
    try:
        sweep.send_signal(signal.SIGINT)
        output, _ = sweep.communicate(timeout=60)
        assert local_slurm.job(job_id)["JobState"] == "RUNNING"
    finally:
        sweep.kill()
        local_slurm.command("scancel", job_id)
    assert sweep.returncode == 130 and "Traceback" not in output, output
    (sweep_dir,) = tmp_path.glob("multirun/*")
    said = "Stopped waiting by Ctrl-C: the sweep's jobs run on (squeue --me; scancel {} stops them"
    assert said.format(job_id) in output and f"Their folders: {sweep_dir}/<n>" in output, output


def test_the_command_that_a_cancelled_sweep_job_prints_resumes_its_point(local_slurm, tmp_path):
    """scancel of a point's job: its ranks save, and the line named `python train.py resume=...`,
    which would train on the login node, alone (and a sweep takes no resume=). It names a job of
    the point's size, which `python -m <package>.slurm` renders and submits: it continues the point
    in its folder. The sweep command ended in submitit's traceback and wrote no summary: now it
    names the point, its state and the same command, writes the summary and exits 1."""
    sweep, job_id = start_slow_sweep(local_slurm, tmp_path, 400, "cluster.slurm.time=00:20:00")
    try:
        local_slurm.command("scancel", job_id)
        output, _ = sweep.communicate(timeout=300)
    finally:
        sweep.kill()
    (point,) = tmp_path.glob("multirun/*/0")
    logs = "".join(path.read_text() for path in tmp_path.glob(f"multirun/*/.submitit/{job_id}/*_log.out"))
    line = next(line for line in logs.splitlines() if line.startswith("Stopped by SIGTERM"))
    render = "python -m {{ cookiecutter.package_name }}.slurm"
    render += " cluster=localslurm nodes=2 gpus=2 strategy=ddp launcher=srun cluster.slurm.time=00:20:00"
    resume = f"Resume: {render} --submit -- resume={point}"
    assert line.endswith(resume), line
    step = newest_checkpoint(point)[1]
    assert sweep.returncode == 1 and "Traceback" not in output, output
    said = [line for line in output.splitlines() if line.startswith(("Point ", "ERROR: "))]
    log_dir = f"{point.parent}/.submitit/{job_id}/"
    assert said == [
        f"Point 0 (Slurm job {job_id}) CANCELLED, saved at step {step}; logs: {log_dir}. {resume}",
        f"ERROR: 1 of 1 points of the sweep did not finish (above). Summary: {point.parent}/sweep_summary.yaml",
    ], output
    (summary,) = summary_of(tmp_path)["points"]
    assert summary["state"] == "CANCELLED" and summary["continue"] == resume, summary
    epochs = step // 2 + 2  # 2 steps an epoch: a few steps more
    command = [*shlex.split(line.split("Resume: ", 1)[1]), f"trainer.max_epochs={epochs}"]
    script = PROJECT / "logs" / "sbatch-localslurm-2x2-srun.sh"  # where --submit writes it
    try:
        env = local_slurm.env()
        submitted = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120)
        assert submitted.returncode == 0, submitted.stderr
        resumed = re.search(r"Submitted batch job (\d+)", submitted.stdout)[1]
        info = local_slurm.wait(resumed, timeout=300)
        log = "".join(path.read_text() for path in (PROJECT / "logs").glob(f"*-{resumed}.out"))  # the script's --output
        assert info["JobState"] == "COMPLETED", f"job {resumed} ended {info['JobState']}:\n{log}"
    finally:
        script.unlink(missing_ok=True)
    assert starts_of(tmp_path / "starts")[-1][1] == step, "it did not resume from the saved step"
    assert newest_checkpoint(point)[1] == 2 * epochs


def test_a_cancelled_sweep_names_a_point_that_never_started_and_how_to_run_it_again(local_slurm, tmp_path):
    """`scancel <array>` while the second point waits for the first (array_parallelism=1): the
    first saves and names its resume command, the second, which never started, the sweep of itself."""
    one_at_a_time = "hydra.launcher.array_parallelism=1"
    sweep, first = start_slow_sweep(local_slurm, tmp_path, 400, one_at_a_time, seeds="1,2")
    try:
        local_slurm.command("scancel", first.split("_")[0])
        output, _ = sweep.communicate(timeout=300)
    finally:
        sweep.kill()
    assert sweep.returncode == 1 and "Traceback" not in output, output
    started, waiting = summary_of(tmp_path)["points"]
    assert (started["state"], waiting["state"]) == ("CANCELLED", "CANCELLED"), (started, waiting)
    assert started["continue"].startswith("Resume: python -m {{ cookiecutter.package_name }}.slurm "), started
    assert waiting["directory"] is None and not waiting["checkpoints"], waiting
    again = shlex.join(["python", "train.py", "-m", "hydra/launcher=slurm", *waiting["overrides"]])
    assert waiting["continue"] == f"Again: {again}" and "seed=2" in waiting["overrides"], waiting
    said = [line for line in output.splitlines() if line.startswith(("Point ", "ERROR: "))]
    assert said[1].startswith(f"Point 1 (Slurm job {waiting['slurm_job']}) CANCELLED, nothing saved; logs: "), said
    assert said[2].startswith("ERROR: 2 of 2 points of the sweep did not finish (above)."), said


def test_a_sweep_point_that_raises_fails_its_job_and_the_sweep_names_it(local_slurm, tmp_path):
    """An exception on one rank of a point: Hydra handed it back as the point's result, the ranks
    exited 0 and Slurm said COMPLETED; the sweep command ended in a traceback of rank 0's error
    (its peer had gone), with no summary. Now the job FAILED, the other point still finishes, and
    the sweep names the point that did not, with the command that runs it again."""
    fail = ["+callbacks.fail._target_=tests.slurm_helpers.RaiseOnRank", "+callbacks.fail.rank=1,null"]
    one_node = [*SLURM_SWEEP, "cluster.num_nodes=1", f"output_root={tmp_path}", "trainer.max_epochs=2"]
    result = run_sweep(*one_node, *fail, env=local_slurm.env())
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in result.stderr, output
    failed, finished = summary_of(tmp_path)["points"]
    assert (failed["state"], finished["state"]) == ("FAILED", "COMPLETED"), (failed, finished)
    # Slurm shows COMPLETING until its epilog and step clean-up are done: wait for the end state
    assert local_slurm.wait(failed["slurm_job"], timeout=120)["JobState"] == "FAILED"
    logs = "".join(path.read_text() for path in tmp_path.glob(f"multirun/*/.submitit/{failed['slurm_job']}/*_log.out"))
    assert "RuntimeError: a test's failure on rank 1" in logs
    again = shlex.join(["python", "train.py", "-m", "hydra/launcher=slurm", *failed["overrides"]])
    assert failed["continue"] == f"Again: {again}" and not failed["checkpoints"], failed  # at step 2 of 4
    assert f"Point 0 (Slurm job {failed['slurm_job']}) FAILED, nothing saved; logs: " in result.stderr, output
    assert "ERROR: 1 of 2 points of the sweep did not finish (above)" in result.stderr, output
