"""Horovod (the project's own Lightning 2.x strategy) on 2 CPU processes, started by
`horovodrun --gloo` (and `--mpi`): ranks in step, the same loss curve as DDP, rank-0
checkpoints, resume. Under Slurm (srun --mpi=pmix): tests/test_slurm_jobs.py."""

import csv
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from tests.helpers import (
    FAST,
    PROJECT,
    assert_same_weights,
    project_env,
    record_saves,
    recorded,
    require_horovod,
    run_train,
    start_until_first_checkpoint,
    step_of,
)

pytest.importorskip("horovod.torch", reason="build it with: bash scripts/install-horovod.sh")
pytestmark = pytest.mark.slow

HOROVODRUN = (shutil.which("horovodrun") or str(Path(sys.executable).with_name("horovodrun")), "-np", "2")
PROJECTS_HOROVODRUN = (sys.executable, "-m", "{{ cookiecutter.package_name }}.horovodrun")  # (horovodrun.py)
# How the ranks talk: gloo (always built) or MPI (horovodrun runs Open MPI's mpirun, with
# --allow-run-as-root and 2 slots on localhost: nothing to add as root or on a 1-core machine).
CONTROLLERS = {"gloo": ("--gloo",), "mpi": ("--mpi",)}
TWO_CPU_PROCESSES = ["trainer.accelerator=cpu", "trainer.log_every_n_steps=1"]


def train_horovod(tmp_path, *overrides: str, controller: str = "gloo"):
    record = tmp_path / "record"
    result = run_train(
        *FAST,
        "strategy=horovod",
        *TWO_CPU_PROCESSES,
        f"output_root={tmp_path / 'outputs'}",
        "+callbacks.record._target_=tests.helpers.RecordRanks",
        f"+callbacks.record.path={record}",
        *overrides,
        launcher=(*HOROVODRUN, *CONTROLLERS[controller], sys.executable),
    )
    return result, *recorded(record)


def logged(run_dir: Path, name: str) -> list[float]:
    with open(run_dir / "csv" / "metrics.csv") as metrics:
        return [float(row[name]) for row in csv.DictReader(metrics) if row.get(name)]


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_horovodrun_trains_ranks_in_step_and_rank0_writes(tmp_path, controller):
    require_horovod(mpi=controller == "mpi")
    start = time.monotonic()
    _result, weights, writes = train_horovod(tmp_path, controller=controller)
    print(f"\nhorovodrun --{controller}, 2 processes: {time.monotonic() - start:.1f} s")
    assert_same_weights(weights, world_size=2)  # parameters and (broadcast) BatchNorm statistics
    assert [w["world_size"] for w in weights] == [2, 2]
    run_dirs = list((tmp_path / "outputs").iterdir())
    assert len(run_dirs) == 1, f"ranks disagreed on the run directory: {run_dirs}"
    assert (run_dirs[0] / "checkpoints" / "last.ckpt").exists()
    assert set(writes) == {0}, f"only rank 0 may write checkpoints, got writes from ranks {sorted(writes)}"


def test_loss_curve_matches_ddp_with_the_same_seed_and_global_batch(tmp_path):
    accumulate = "trainer.accumulate_grad_batches=2"  # Horovod averages every 2nd backward pass only
    train_horovod(tmp_path / "horovod", "run_id=run", accumulate)
    run_train(
        *FAST,
        "strategy=ddp",
        "trainer.devices=2",
        accumulate,
        *TWO_CPU_PROCESSES,
        f"output_root={tmp_path / 'ddp'}",
        "run_id=run",
    )
    horovod_run, ddp_run = tmp_path / "horovod" / "outputs" / "run", tmp_path / "ddp" / "run"
    assert len(logged(horovod_run, "train/loss")) == 2  # logged per optimizer step: 4 batches / 2
    # Same data split, initial weights, dropout and averaged gradients: equal up to the order of
    # float sums (measured: identical). val/* are reduced over both ranks (val/acc by torchmetrics).
    for name in ("train/loss", "val/loss", "val/acc"):
        horovod, ddp = torch.tensor(logged(horovod_run, name)), torch.tensor(logged(ddp_run, name))
        torch.testing.assert_close(horovod, ddp, rtol=1e-4, atol=1e-5, msg=f"{name}: horovod {horovod} ddp {ddp}")


def test_resume_continues_on_every_rank(tmp_path):
    train_horovod(tmp_path, "run_id=resumable", "trainer.max_epochs=1")
    result, weights, _writes = train_horovod(tmp_path, "run_id=resumable", "trainer.max_epochs=2", "ckpt_path=last")
    assert "Restoring states from the checkpoint" in result.stdout + result.stderr
    assert [w["global_step"] for w in weights] == [8, 8]  # one more epoch, not two
    assert_same_weights(weights, world_size=2)
    checkpoint = torch.load(tmp_path / "outputs" / "resumable" / "checkpoints" / "last.ckpt", weights_only=False)
    steps = [state["step"] for state in checkpoint["optimizer_states"][0]["state"].values()]
    assert all(int(step) == 8 for step in steps)  # the optimizer state was restored and kept counting


def test_gpus_need_a_horovod_built_with_cuda(monkeypatch):
    import horovod.torch as hvd

    from {{ cookiecutter.package_name }}.launch.errors import SetupError
    from {{ cookiecutter.package_name }}.strategies.horovod import check_gpu_support

    monkeypatch.setattr(hvd, "cuda_built", lambda: False)
    with pytest.raises(SetupError, match="(?s)built without CUDA.*Fix: HOROVOD_REBUILD=1 bash scripts/install"):
        check_gpu_support(torch.device("cuda", 0))
    check_gpu_support(torch.device("cpu"))  # CPUs need nothing more than gloo


def test_too_little_data_for_the_horovod_ranks_names_what_sets_their_number(tmp_path):
    """The fix named trainer.devices, which does not start Horovod's ranks: horovodrun -np does."""
    require_horovod()
    command = [*HOROVODRUN, "--gloo", sys.executable, str(PROJECT / "train.py"), *FAST, "strategy=horovod"]
    command += [*TWO_CPU_PROCESSES, "data.num_samples=64", "data.batch_size=64", f"output_root={tmp_path}"]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    line = next(line for line in result.stderr.splitlines() if "ERROR: data.batch_size=64" in line)
    assert "fewer processes (horovodrun -np, or srun's tasks)" in line, line


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_the_projects_horovodrun_stopped_by_sigterm_waits_for_the_save_and_exits_143_with_one_line(
    tmp_path, controller
):
    """horovodrun (gloo) passes a signal on to its workers, which save and exit 143; Horovod's own
    then killed them 5 s later, here in the middle of a save of 12 s (a large model), and printed
    a traceback, exit 1. With MPI, Horovod's became a shell that the signal ended at once, and
    mpirun and the workers trained on, unsignalled. The project's horovodrun module (the sbatch
    scripts' launcher=horovodrun) passes the signal on, waits for the save and exits 143."""
    require_horovod(mpi=controller == "mpi")
    run, saves = tmp_path / "run", tmp_path / "saves.txt"
    horovodrun = (*PROJECTS_HOROVODRUN, "-np", "2", *CONTROLLERS[controller], sys.executable)
    overrides = ["strategy=horovod", *TWO_CPU_PROCESSES, "trainer.max_epochs=40"]
    overrides += record_saves(saves, seconds_per_step=0.2, stop_save_seconds=12)
    process = start_until_first_checkpoint(run, *overrides, launcher=horovodrun)
    process.send_signal(signal.SIGTERM)  # horovodrun alone: it stops its workers
    stdout, stderr = process.communicate(timeout=240)
    output = stdout + stderr
    assert process.returncode == 143, output
    assert "Traceback" not in output, output
    assert "horovodrun: stopped by SIGTERM, which it passed on to its workers" in stderr
    step = int(saves.read_text().split()[-1])
    assert f"Stopped by SIGTERM at step {step}: saved " in output, output
    assert step_of(run / "checkpoints" / "last.ckpt") == step
    # The command that resumes it starts horovodrun again (before, it named `python train.py`: one process).
    again = f"python -m {PROJECTS_HOROVODRUN[2]} -np 2 {CONTROLLERS[controller][0]} {sys.executable} "
    # As written: mpirun gives rank 0 a terminal, in whose width Rich wraps the line, and tags each part.
    unwrapped = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\[\d+,\d+\]<std(?:out|err)>:|\s", "", output)
    assert re.sub(r"\s", "", f"Resume: {again}{PROJECT / 'train.py'} resume={run}") in unwrapped, output
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if f"output_root={tmp_path}" in (p.info["cmdline"] or [])]
    assert not left, f"workers left running: {left}"


@pytest.mark.parametrize("exec_by_the_shell", [False, True], ids=["shell-waits", "shell-execs"])
def test_the_projects_horovodrun_stop_leaves_the_workers_exit_code_to_the_helper_that_reads_it(exec_by_the_shell):
    """gloo's helper reads a worker's exit code by waiting for its shell (`sh -c "env ... python"`).
    Horovod's stop waited for that shell too: where its wait came first, the helper's read 0, and
    horovodrun exited 0 after a stop without a line (seen in CI, where the machine is busy; here
    the helper's wait comes last on purpose, which made it 0 every time)."""
    require_horovod()
    from {{ cookiecutter.package_name }}.horovodrun import stop_workers

    worker = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)); print(1, flush=True)"
    worker += "; time.sleep(60)"
    command = f"{'exec ' if exec_by_the_shell else ''}env A=1 {shlex.quote(sys.executable)} -c {shlex.quote(worker)}"
    shell = subprocess.Popen(command, shell=True, stdout=subprocess.PIPE, text=True)
    assert shell.stdout.readline() == "1\n"  # the worker is up, its SIGTERM handler set
    stop_workers(shell.pid)
    assert shell.wait(timeout=30) == 143


def test_the_projects_horovodrun_stop_ends_a_shell_that_has_not_started_its_worker_yet():
    """A signal while gloo starts the workers: a shell that had not started its worker yet was left
    alone (it had no child to stop), and the worker it then started trained to its end, exit 0."""
    require_horovod()
    from {{ cookiecutter.package_name }}.horovodrun import stop_workers

    shell = subprocess.Popen("read -r _; exec sleep 60", shell=True, stdin=subprocess.PIPE)  # no child: it reads
    stop_workers(shell.pid)
    assert shell.wait(timeout=30) == -signal.SIGTERM


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_a_worker_stopped_by_a_wrong_override_ends_the_projects_horovodrun_with_its_code_and_one_line(
    tmp_path, controller
):
    """A wrong override: each worker stops with one line, exit 2; with gloo, Horovod's horovodrun
    then raised a RuntimeError, a traceback, and exited 1. (With MPI it hands over to mpirun,
    which reports the worker's exit in a box of its own, and exits 2.)"""
    require_horovod(mpi=controller == "mpi")
    horovodrun = [*PROJECTS_HOROVODRUN, "-np", "2", *CONTROLLERS[controller]]
    command = [*horovodrun, sys.executable, str(PROJECT / "train.py"), "strategy=bogus", f"output_root={tmp_path}"]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output, output
    assert "ERROR: strategy=bogus: no such choice of strategy" in output
    if controller == "gloo":
        assert re.search(r"horovodrun: the worker \d exited 2 first \(the lines above say why\)", result.stderr), output


@pytest.mark.parametrize(
    ("options", "line", "code"),
    [(["-np", "0"], "horovodrun: -np 0: no process to start. Fix: -np <processes>, 1 or more", 2),
     (["-np", "2", "-H", "nohost.invalid:2"], "horovodrun: could not connect to some hosts via ssh. Fix: -H hosts", 1),
     (["-np", "2", "--no-such-option"], "ERROR: unrecognized arguments: --no-such-option (see python -m", 2)],
    ids=["no-process", "unreachable-host", "unknown-option"],
)  # fmt: skip
def test_the_projects_horovodrun_stops_on_a_wrong_option_with_one_line(options, line, code, tmp_path):
    """-np 0 started nothing and exited 0; a host that ssh cannot reach ended in a RuntimeError traceback;
    an unknown option, in argparse's usage lines and its error."""
    require_horovod()
    horovodrun = [*PROJECTS_HOROVODRUN, "--gloo", *options]
    command = [*horovodrun, sys.executable, str(PROJECT / "train.py"), "strategy=horovod", f"output_root={tmp_path}"]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == code, result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(line), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
