"""Submit jobs to the local Slurm of the tests and look at what they did."""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytorch_lightning as pl

from {{ cookiecutter.package_name }}.slurm.profiles import load
from {{ cookiecutter.package_name }}.slurm.render import Job, render

from tests.helpers import PROJECT, project_env


@dataclass
class Finished:
    job_id: str
    state: str
    exit_code: str
    seconds: float  # from submission to the end, as seen from here
    log: str  # the batch log, then each rank's (or node's) output


@dataclass
class LocalSlurm:
    conf: Path
    partition: str

    def env(self) -> dict[str, str]:
        env = project_env(SLURM_CONF=str(self.conf))
        # `python` in the job is this one; slurm/bin/sacct answers submitit (sweeps) without accounting.
        env["PATH"] = f"{Path(__file__).parent / 'slurm' / 'bin'}:{Path(sys.executable).parent}:{env['PATH']}"
        return env

    def command(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(args, env=self.env(), cwd=PROJECT, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {result.returncode}: {result.stdout}{result.stderr}")
        return result

    def submit(self, script: Path, *train_overrides: str, sbatch_options: tuple[str, ...] = ()) -> str:
        """sbatch from the project directory; returns the job id. The job name is the test's
        directory: job ids start again at 2 in each session, and the logs are named after both."""
        for stale in (PROJECT / "logs").glob(f"{script.parent.name}-*"):  # an earlier session's job of this id
            shutil.rmtree(stale)
        options = [f"--job-name={script.parent.name}", f"--output={script.parent / '%x-%j.out'}", *sbatch_options]
        result = self.command("sbatch", "--parsable", *options, str(script), *train_overrides)
        return result.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        text = self.command("scontrol", "show", "job", job_id).stdout
        return dict(re.findall(r"(\w+)=(\S*)", text))

    def wait(self, job_id: str, until=("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"), timeout=600):
        deadline = time.monotonic() + timeout
        while (info := self.job(job_id))["JobState"] not in until:
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {info['JobState']} after {timeout} s:\n{info}")
            time.sleep(0.5)
        return info

    def wait_for(self, condition, failure: str, timeout: float):
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{failure} within {timeout} s")
            time.sleep(0.5)

    def release_requeued(self, job_id: str, restarts: int = 1, timeout: float = 120) -> None:
        """A requeued job waits ~2 minutes (BeginTime) before it may start again: start it now.

        Not while Slurm still cleans up the killed run: given nodes again in the same second,
        the job was killed as "non-startable" (Job credential revoked) in 3 of 15 runs. So wait
        until it is PENDING and no node is COMPLETING, then 2 s more, as a real requeue waits."""
        self.wait_for(
            lambda: int(self.job(job_id).get("Restarts", 0)) >= restarts and self.job(job_id)["JobState"] == "PENDING",
            f"job {job_id} was not requeued (restart {restarts})",
            timeout,
        )
        self.wait_for(lambda: "COMPLETING" not in self.node_states(), "nodes still COMPLETING", timeout)
        time.sleep(2)
        deadline = time.monotonic() + timeout
        while self.job(job_id)["JobState"] == "PENDING":
            if time.monotonic() > deadline:
                raise AssertionError(f"requeued job {job_id} did not start again within {timeout} s")
            self.command("scontrol", "update", f"jobid={job_id}", "StartTime=now", check=False)
            time.sleep(2)

    def kill_step(self, job_id: str, step: str = "0") -> int:
        """SIGKILL the training processes of a job step, as a failed node would end them: no
        signal they could act on (`scancel --signal=KILL` cancels the job, with SIGTERM first).
        The processes are found by their Slurm variables; returns how many were killed."""
        killed = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                env = dict(item.split("=", 1) for item in (proc / "environ").read_text().split("\0") if "=" in item)
                is_training = "train.py" in (proc / "cmdline").read_text()
            except (OSError, ValueError):
                continue  # not a process, gone, or not ours to read
            ours = env.get("SLURM_CONF") == str(self.conf)  # not a job of another Slurm on this machine
            if is_training and ours and env.get("SLURM_JOB_ID") == job_id and env.get("SLURM_STEP_ID") == step:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed += 1
        return killed

    def node_states(self) -> str:
        return self.command("sinfo", "--noheader", "--Node", "--format=%T").stdout.upper()

    def log(self, script: Path, job_id: str) -> str:
        return job_log(script, job_id)

    def run(self, script: Path, *train_overrides: str, sbatch_options: tuple[str, ...] = (), timeout=600) -> Finished:
        """Submit and wait for the end (a hang fails the test after `timeout` seconds)."""
        start = time.monotonic()
        job_id = self.submit(script, *train_overrides, sbatch_options=sbatch_options)
        info = self.wait(job_id, timeout=timeout)
        return Finished(job_id, info["JobState"], info["ExitCode"], time.monotonic() - start, job_log(script, job_id))


def job_log(script: Path, job_id: str) -> str:
    name = script.parent.name
    parts = [path.read_text() for path in sorted(script.parent.glob(f"{name}-{job_id}.out"))]
    for path in sorted((PROJECT / "logs" / f"{name}-{job_id}").glob("*.log")):
        parts.append(f"--- {path.name}\n{path.read_text()}")
    return "\n".join(parts)


def write_script(directory: Path, name: str = "job.sh", **job) -> Path:
    """Render a script for the local Slurm (configs/cluster/localslurm.yaml)."""
    text = render(Job(load("cluster", "localslurm"), **{"strategy": "ddp", **job}))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


class RecordStarts(pl.Callback):
    """Test-only: note where each start of training begins, and slow the steps down so a
    signal can arrive in the middle. Add with `+callbacks.starts._target_=tests.slurm_helpers.RecordStarts`.
    Testing (test_after_fit): `testing` appears at its first batch's end, `tested` at its end."""

    def __init__(self, path: str, seconds_per_step: float = 0.0, seconds_per_test_batch: float = 0.0):
        self.path = Path(path)
        self.seconds_per_step = seconds_per_step
        self.seconds_per_test_batch = seconds_per_test_batch

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        (self.path / "testing").touch()
        time.sleep(self.seconds_per_test_batch)

    def on_test_end(self, trainer, pl_module):
        if trainer.is_global_zero:
            (self.path / "tested").touch()

    def on_train_start(self, trainer, pl_module):
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / f"starts-rank{trainer.global_rank}.txt", "a") as record:
            record.write(f"{trainer.current_epoch} {trainer.global_step}\n")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        time.sleep(self.seconds_per_step)


class RaiseOnRank(pl.Callback):
    """Test-only: an exception on one rank at a training step, as a bug or an out-of-memory would
    raise. Add with `+callbacks.fail._target_=tests.slurm_helpers.RaiseOnRank +callbacks.fail.rank=1`."""

    def __init__(self, rank: int | None, step: int = 2):
        self.rank, self.step = rank, step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            raise RuntimeError(f"a test's failure on rank {self.rank}")


def record_starts(path: Path, seconds_per_step: float = 0.0, seconds_per_test_batch: float = 0.0) -> list[str]:
    """The overrides that add RecordStarts."""
    return [
        "+callbacks.starts._target_=tests.slurm_helpers.RecordStarts",
        f"+callbacks.starts.path={path}",
        f"+callbacks.starts.seconds_per_step={seconds_per_step}",
        f"+callbacks.starts.seconds_per_test_batch={seconds_per_test_batch}",
    ]


def starts_of(starts) -> list[tuple[int, int]]:
    """(epoch, global_step) at each start of training, as rank 0 recorded them."""
    return [tuple(map(int, line.split())) for line in (starts / "starts-rank0.txt").read_text().splitlines()]
