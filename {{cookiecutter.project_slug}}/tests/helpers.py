"""What the tests share: run train.py as a user would, make small MNIST files, and
callbacks that record what each rank wrote and which checkpoints were saved."""

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from {{ cookiecutter.package_name }}.data.idx import write_idx

PROJECT = Path(__file__).resolve().parents[1]


def as_in_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it (a Popen's preexec_fn): where the tests run in the
    background (CI), SIGINT is ignored, and Python then installs no KeyboardInterrupt for it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def needs_cuda(test):
    """A test that needs a CUDA GPU: skipped without one, and marked, so that a GPU machine's
    short lease can run these first (`pytest -m cuda`)."""
    return pytest.mark.cuda(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")(test))


# Small and quick: synthetic data, a few steps, no progress bar; on the CPU also where a GPU is.
FAST = [
    "experiment=smoke",
    "trainer.accelerator=cpu",
    "data.num_samples=256",
    "data.batch_size=32",
    "trainer.limit_train_batches=4",
    "trainer.limit_val_batches=2",
    "trainer.num_sanity_val_steps=0",
    "logger=csv",
    "~callbacks.progress_bar",
]

# The project's DeepSpeed strategy on CPUs (tests/cpu_deepspeed.py), so that CI trains ZeRO without GPUs.
CPU_DEEPSPEED = ["strategy.instance._target_=tests.cpu_deepspeed.CPUDeepSpeedStrategy", "strategy.requires.cuda=false"]


def launcher_variable(name: str) -> bool:
    """A variable by which a launcher tells a process its rank, the job's size or its job step.

    Only these are dropped: a test decides itself which launcher it imitates. The site's own
    settings stay (Open MPI's OMPI_MCA_*, PMIx's PMIX_MCA_*, SLURM_CONF): without them MPI may
    not even start there, and Lightning starts it when mpi4py is installed.
    """
    torch = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK")
    if name in (*torch, "RUN_ID", "RESTART_COMMAND"):  # the last two: the project's own, for its ranks
        return True
    if name.startswith(("SLURM_", "TORCHELASTIC_")):  # the job's and step's, not the site's
        return name != "SLURM_CONF"
    mpi = name.startswith(("OMPI_", "PMI_", "PMIX_", "HOROVOD_")) and not name.startswith(("OMPI_MCA_", "PMIX_MCA_"))
    return mpi and ("RANK" in name or "SIZE" in name or name.startswith("OMPI_COMM_WORLD_"))


def project_env(**extra: str) -> dict[str, str]:
    """The environment of a user who ran `pip install -e .`: the package and tests importable."""
    path = os.pathsep.join([str(PROJECT / "src"), str(PROJECT), os.environ.get("PYTHONPATH", "")])
    env = {name: value for name, value in os.environ.items() if not launcher_variable(name)}
    env.update({"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}, **extra)
    return env


def run_train(*overrides: str, launcher: tuple[str, ...] = (), timeout: int = 300, env=None, check: bool = True):
    """Run `[launcher] python train.py overrides...`; fail the test with its output if it fails
    (unless check=False)."""
    command = [*(launcher or (sys.executable,)), str(PROJECT / "train.py"), *overrides]
    env = env or project_env()
    if CPU_DEEPSPEED[0] in overrides:  # DeepSpeed on the CPU also where a GPU is (tests/cpu_deepspeed.py)
        env = {**env, "DS_ACCELERATOR": "cpu"}
    result = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def require_horovod(mpi: bool = False):
    """horovod.torch, or skip the test: it is missing, or (mpi=True) was built without MPI."""
    hvd = pytest.importorskip("horovod.torch", reason="build it with: bash scripts/install-horovod.sh")
    if mpi and not hvd.mpi_built():
        pytest.skip(
            "Horovod was built without MPI: install Open MPI (Debian: openmpi-bin libopenmpi-dev), "
            "then HOROVOD_REBUILD=1 bash scripts/install-horovod.sh"
        )
    return hvd


def write_small_mnist(root: Path, train: int = 256, test: int = 64) -> Path:
    """Real IDX files in torchvision's layout, with random content."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, count in (("train", train), ("t10k", test)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (count, 28, 28), dtype=np.uint8))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, count, dtype=np.uint8))
    return root


class RecordRanks(pl.Callback):
    """Test-only: each rank saves its final weights and lists the checkpoints it wrote.

    Add with `+callbacks.record._target_=tests.helpers.RecordRanks +callbacks.record.path=DIR`.
    """

    def __init__(self, path: str):
        self.path = Path(path)

    def setup(self, trainer, pl_module, stage):
        self.path.mkdir(parents=True, exist_ok=True)
        rank = trainer.global_rank
        io = trainer.strategy.checkpoint_io
        save = io.save_checkpoint

        def recording_save(checkpoint, path, storage_options=None):
            with open(self.path / f"writes-rank{rank}.txt", "a") as log:
                log.write(f"{path}\n")
            return save(checkpoint, path, storage_options=storage_options)

        io.save_checkpoint = recording_save

    def on_fit_end(self, trainer, pl_module):
        state = {name: tensor.detach().cpu() for name, tensor in pl_module.state_dict().items()}
        torch.save(
            {
                "state": state,
                "global_step": trainer.global_step,
                "world_size": trainer.world_size,
                "sync_batchnorm": any(isinstance(m, torch.nn.SyncBatchNorm) for m in pl_module.modules()),
                # The samples this rank's last epoch was cut from (Lightning's sampler for the rank).
                "train_indices": list(trainer.train_dataloader.batch_sampler.sampler),
            },
            self.path / f"weights-rank{trainer.global_rank}.pt",
        )


def recorded(path: Path) -> tuple[list[dict], dict[int, list[str]]]:
    """The weights of every rank, and the checkpoint files each rank wrote."""
    weights = [torch.load(f, weights_only=False) for f in sorted(path.glob("weights-rank*.pt"))]
    writes = {int(f.stem.removeprefix("writes-rank")): f.read_text().split() for f in path.glob("writes-rank*.txt")}
    return weights, writes


def assert_same_weights(weights: list[dict], world_size: int) -> None:
    assert len(weights) == world_size, f"expected {world_size} ranks to finish, got {len(weights)}"
    first = weights[0]["state"]
    for other in weights[1:]:
        for name, tensor in first.items():
            torch.testing.assert_close(other["state"][name], tensor, msg=f"{name} differs between ranks")


def step_of(path: Path) -> int:
    return torch.load(path, weights_only=False, map_location="cpu")["global_step"]


class RecordSaves(pl.Callback):
    """Test-only: the global step of every checkpoint saved, one line each. `stop_save_seconds`:
    rank 0's save on a stop takes that much longer (a large model, a slow shared file system);
    `<path>.stopping` appears as that save begins. `stop_write_seconds`: the same, where the
    writer thread writes the file (the model's state is taken by then)."""

    def __init__(
        self, path: str, seconds_per_step: float = 0.0, stop_save_seconds: float = 0.0, stop_write_seconds: float = 0.0
    ):
        self.path = Path(path)
        self.seconds_per_step = seconds_per_step
        self.stop_save_seconds = stop_save_seconds
        self.stop_write_seconds = stop_write_seconds

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        if trainer.interrupted and trainer.is_global_zero:
            self.path.with_name(self.path.name + ".stopping").touch()
            time.sleep(self.stop_save_seconds)
            if self.stop_write_seconds:  # this save's file: ForwardOnlyCheckpointIO writes through _write
                checkpoint_io = trainer.strategy.checkpoint_io
                write = checkpoint_io._write
                checkpoint_io._write = lambda *args: (time.sleep(self.stop_write_seconds), write(*args))
        with open(self.path, "a") as record:
            record.write(f"{checkpoint['global_step']}\n")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        time.sleep(self.seconds_per_step)


def record_saves(
    path: Path, seconds_per_step: float = 0.0, stop_save_seconds: float = 0.0, stop_write_seconds: float = 0.0
) -> list[str]:
    return [
        "+callbacks.saves._target_=tests.helpers.RecordSaves",
        f"+callbacks.saves.path={path}",
        f"+callbacks.saves.seconds_per_step={seconds_per_step}",
        f"+callbacks.saves.stop_save_seconds={stop_save_seconds}",
        f"+callbacks.saves.stop_write_seconds={stop_write_seconds}",
    ]


class SaveAfterStep(pl.Callback):
    """Test-only: save a checkpoint at the end of one training step, as a timed, stop or
    preemption checkpoint does."""

    def __init__(self, step: int, path: str):
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def save_after_step(step: int, path: Path) -> list[str]:
    return [
        "+callbacks.save_after._target_=tests.helpers.SaveAfterStep",
        f"+callbacks.save_after.step={step}",
        f"+callbacks.save_after.path={path}",
    ]


def start_until_first_checkpoint(
    run: Path, *overrides: str, env: dict[str, str] | None = None, own_group: bool = False, launcher=()
) -> subprocess.Popen:
    """[launcher] train.py as run_id=<run.name> under run.parent, returned once it wrote last.ckpt.
    own_group: in a process group of its own (its ranks too), which os.killpg signals at once."""
    written = run / "checkpoints" / "last.ckpt"
    return start_until(written, run, *overrides, env=env, own_group=own_group, launcher=launcher)


def start_until(
    written: Path,
    run: Path,
    *overrides: str,
    env: dict[str, str] | None = None,
    own_group: bool = False,
    launcher: tuple[str, ...] = (),
) -> subprocess.Popen:
    """[launcher] train.py as run_id=<run.name> under run.parent, returned once the file `written` exists."""
    train = [*(launcher or (sys.executable,)), str(PROJECT / "train.py")]
    command = [*train, *FAST, f"output_root={run.parent}", f"run_id={run.name}"]
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env = env or project_env()
    process = subprocess.Popen([*command, *overrides], cwd=PROJECT, env=env, start_new_session=own_group, **pipes)
    wait_until_written(written, process)
    return process


def wait_until_written(written: Path, process: subprocess.Popen, seconds: float = 240) -> None:
    """Until the file `written` exists, the process has ended, or `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while not written.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)


class RecordValidations(pl.Callback):
    """Test-only: the epoch of every whole validation during training, one line each. Each
    validation batch takes `seconds_per_batch` longer; `<path>.began` appears at the end of the
    first batch of a validation (not the sanity check), a moment to stop the run in."""

    def __init__(self, path: str, seconds_per_batch: float = 0.0):
        self.path = Path(path)
        self.seconds_per_batch = seconds_per_batch

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if not trainer.sanity_checking:
            self.path.with_name(self.path.name + ".began").touch()
            time.sleep(self.seconds_per_batch)

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking and trainer.is_global_zero:
            with open(self.path, "a") as record:
                record.write(f"{trainer.current_epoch}\n")


class SignalInSanityCheck(pl.Callback):
    """Test-only: SIGTERM to this process after the sanity check's first batch."""

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if trainer.sanity_checking and batch_idx == 0:
            os.kill(os.getpid(), signal.SIGTERM)


class SignalAtTrainingEnd(pl.Callback):
    """Test-only: SIGTERM to this process at the training's end, before its last save."""

    def on_train_end(self, trainer, pl_module):
        os.kill(os.getpid(), signal.SIGTERM)


class RecordBatches(pl.Callback):
    """Test-only: rank 0's training batches, one line each: the epoch and a hash of the batch."""

    def __init__(self, path: str):
        self.path = Path(path)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.is_global_zero:
            images, labels = batch
            digest = hashlib.sha1(images.cpu().numpy().tobytes() + labels.cpu().numpy().tobytes()).hexdigest()
            with open(self.path, "a") as record:
                record.write(f"{trainer.current_epoch} {digest[:12]}\n")


def record_batches(path: Path) -> list[str]:
    return ["+callbacks.batches._target_=tests.helpers.RecordBatches", f"+callbacks.batches.path={path}"]


def record_validations(path: Path, seconds_per_batch: float) -> list[str]:
    return [
        "+callbacks.validations._target_=tests.helpers.RecordValidations",
        f"+callbacks.validations.path={path}",
        f"+callbacks.validations.seconds_per_batch={seconds_per_batch}",
    ]
