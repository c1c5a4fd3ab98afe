"""One run, one directory; checkpoints only move forward; stops exit with the truth (issue 9).
No Slurm here: tests/test_slurm_jobs.py does requeues and job steps on a real one."""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
import yaml
from omegaconf import OmegaConf

from {{ cookiecutter.package_name }}.callbacks.checkpoints import ForwardOnlyCheckpointIO, newest_checkpoint
from {{ cookiecutter.package_name }}.launch import environment
from {{ cookiecutter.package_name }}.launch.errors import CheckpointNotWritten, SetupError
from {{ cookiecutter.package_name }}.launch.run_directory import checkpoint_to_resume

from tests.helpers import (
    FAST,
    PROJECT,
    as_in_a_terminal,
    needs_cuda,
    project_env,
    record_saves,
    record_validations,
    run_train,
    start_until,
    start_until_first_checkpoint,
    step_of,
    wait_until_written,
)


def train(*overrides: str, env=None) -> subprocess.CompletedProcess:
    """train.py that may fail: the result, whatever the exit code."""
    command = [sys.executable, str(PROJECT / "train.py"), *FAST, *overrides]
    return subprocess.run(command, cwd=PROJECT, env=env or project_env(), capture_output=True, text=True, timeout=300)


def snapshot(directory: Path) -> dict[str, int]:
    """Every file below a directory and its modification time, to prove nothing changed."""
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file()}


# ----------------------------------------------------------------------------- run ids


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path):
    """Case 1: two `python train.py` at once, default run ids: two runs, two directories."""
    command = [sys.executable, str(PROJECT / "train.py"), *FAST, "trainer.max_epochs=1", f"output_root={tmp_path}"]
    start = dict(cwd=PROJECT, env=project_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    runs = [subprocess.Popen(command, **start), subprocess.Popen(command, **start)]
    outputs = [run.communicate(timeout=300)[0].decode() for run in runs]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(outputs)
    directories = sorted(tmp_path.iterdir())
    assert len(directories) == 2, [d.name for d in directories]
    for directory in directories:
        assert (directory / ".hydra" / "config.yaml").exists()
        assert step_of(directory / "checkpoints" / "last.ckpt") == 4


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_JOB_ID": "7", "ENVIRONMENT": "BATCH"}, "slurm-7"),  # the batch shell itself
        ({"SLURM_JOB_ID": "7", "ENVIRONMENT": "BATCH", "SLURM_STEP_ID": "0"}, "slurm-7"),  # its first srun
        ({"SLURM_JOB_ID": "7", "ENVIRONMENT": "BATCH", "SLURM_STEP_ID": "3"}, "slurm-7.3"),  # a later one
        (
            {"SLURM_JOB_ID": "9", "SLURM_ARRAY_JOB_ID": "8", "SLURM_ARRAY_TASK_ID": "2", "ENVIRONMENT": "BATCH"},
            "slurm-8_2",
        ),
        ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}, "slurm-7.0"),  # srun in salloc: each srun its own run
    ],
)
def test_slurm_run_ids_tell_steps_and_array_tasks_apart(monkeypatch, env, expected):
    for name in [n for n in os.environ if n.startswith("SLURM_")] + ["RUN_ID", "ENVIRONMENT"]:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert environment.default_run_id() == expected


def test_a_run_typed_into_an_interactive_allocation_gets_its_own_id(monkeypatch):
    for name in [n for n in os.environ if n.startswith("SLURM_")] + ["RUN_ID", "ENVIRONMENT"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    first = environment.default_run_id()
    assert first.startswith("slurm-7-") and first.endswith(f"_{os.getpid()}")
    assert environment.default_run_id() == first  # resolved again (and in Lightning's child processes)


# ------------------------------------------------------------------ refusing and resuming


def test_a_rerun_with_an_existing_id_is_refused_and_changes_nothing(tmp_path):
    """Case 2: same run_id, no ckpt_path: one line with the resume command; last.ckpt kept."""
    run_train(*FAST, f"output_root={tmp_path}", "run_id=kept", "trainer.max_epochs=2")
    before = snapshot(tmp_path)
    result = train(f"output_root={tmp_path}", "run_id=kept", "trainer.max_epochs=1")
    assert result.returncode == 2
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("ERROR: run directory") and "already holds checkpoints" in error
    assert f"python train.py resume={tmp_path / 'kept'}" in error and "run_id=" in error
    assert "Traceback" not in result.stderr
    assert snapshot(tmp_path) == before, "a refused run changed the run directory"
    assert step_of(tmp_path / "kept" / "checkpoints" / "last.ckpt") == 8


def test_ckpt_path_last_without_a_checkpoint_names_the_runs_that_exist(tmp_path):
    """Case 8: a forgotten run_id with ckpt_path=last is an error, not a silent fresh start."""
    run_train(*FAST, f"output_root={tmp_path}", "run_id=earlier", "trainer.max_epochs=1")
    result = train(f"output_root={tmp_path}", "ckpt_path=last")
    assert result.returncode == 2
    assert "holds no checkpoint to resume" in result.stderr and ": earlier." in result.stderr
    assert f"Fix: resume={tmp_path / 'earlier'} (or another of those), or drop ckpt_path=last" in result.stderr
    assert "Traceback" not in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["earlier"], "the refused run left a directory behind"


def test_the_runs_named_with_ckpt_path_last_are_quoted_as_a_shell_reads_them(tmp_path, monkeypatch):
    """A run named "my run" was listed bare among the others: its name read as two, the fix as none."""
    from {{ cookiecutter.package_name }}.launch import run_directory

    runs = ["a", "my run"]
    monkeypatch.setattr(run_directory, "_runs_with_checkpoints", lambda output_root: runs)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SetupError) as refused:
        checkpoint_to_resume("last", tmp_path / "new", None)
    assert "Runs with checkpoints in .: a, 'my run'. Fix: resume='my run' (or another of those)" in str(refused.value)


def test_resume_uses_the_runs_own_config_and_keeps_its_hydra_folder(tmp_path):
    """Case 8: `resume=DIR` + a new override: the saved overrides, the new one on top."""
    run = tmp_path / "run"
    run_train(*FAST, f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=1", "data.batch_size=16")
    original = {p: (run / ".hydra" / p).read_text() for p in ("config.yaml", "overrides.yaml")}
    assert step_of(run / "checkpoints" / "last.ckpt") == 4
    # The new optimizer setting is trained with (Lightning restores the saved one: callbacks/optimizer_settings.py).
    command = [sys.executable, str(PROJECT / "train.py"), f"resume={run}", "model.optimizer.lr=0.01"]
    command.append("trainer.max_epochs=2")
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Restoring states from the checkpoint" in result.stdout + result.stderr
    assert "Resumed with the config's optimizer settings: lr 0.001 -> 0.01" in result.stdout + result.stderr
    assert step_of(run / "checkpoints" / "last.ckpt") == 8  # batch size 16 kept: 4 steps per epoch
    saved = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert [group["lr"] for group in saved["optimizer_states"][0]["param_groups"]] == [0.01]
    assert {p: (run / ".hydra" / p).read_text() for p in original} == original
    [resumed] = (run / ".hydra" / "resumes").iterdir()
    overrides = yaml.safe_load((resumed / "overrides.yaml").read_text())
    assert "data.batch_size=16" in overrides and overrides[-1] == "trainer.max_epochs=2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_resume_that_changes_the_model_or_its_optimizer_stops_with_one_line_and_changes_nothing(tmp_path):
    """Before: a traceback inside Lightning's restore, and the refused start's record became the
    config that the next `resume=` took. Now one line, and the run as it was; it still resumes."""
    run = tmp_path / "run"
    run_train(*FAST, f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=1")
    before = snapshot(tmp_path)
    for changed, message in (
        ("model=autoencoder", "its weights do not fit the model this config builds (22 differ; net.1.weight: [32]"),
        ("+model.net.channels=8", "net.0.weight: [32, 1, 3, 3] there, [8, 1, 3, 3] here"),
        ("model.optimizer._target_=torch.optim.SGD", "the optimizer this config builds (torch.optim.sgd.SGD needs"),
    ):
        result = train(f"resume={run}", changed, "trainer.max_epochs=2")
        assert result.returncode == 2, result.stderr
        error = result.stderr.strip().splitlines()[-1]
        assert error.startswith("ERROR: ckpt_path=") and message in error and changed in error, error
        assert "Traceback" not in result.stderr
        assert snapshot(tmp_path) == before, "a refused resume changed the run directory (or recorded its config)"
    run_train(f"resume={run}", "trainer.max_epochs=2")
    assert step_of(run / "checkpoints" / "last.ckpt") == 8


def test_the_optimizer_check_takes_what_torch_restores_and_returns_the_changed_settings(tmp_path):
    """The optimizer check refuses a state the configured optimizer cannot step with, and takes
    one it can: Adam for AdamW (the same settings), and an older torch's state that lacks settings
    torch fills in on loading. It returns the settings the config changes (Lightning would restore
    the saved ones); under a learning-rate schedule a changed lr is refused."""
    from functools import partial

    from torch import nn

    from {{ cookiecutter.package_name }}.launch.resume_checks import StartCheckpoint, check_checkpoint_fits

    class Model(nn.Module):  # what the check uses of a LightningModule
        strict_loading = True

        def __init__(self, optimizer):
            super().__init__()
            self.layer, self.optimizer = nn.Linear(3, 2), optimizer

        def configure_optimizers(self):
            return {"optimizer": self.optimizer(self.parameters())}

    trained = Model(torch.optim.AdamW)
    optimizer = trained.configure_optimizers()["optimizer"]
    trained.layer(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state = optimizer.state_dict()
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": trained.state_dict(), "optimizer_states": [state]}, path)
    settings, start = ["lr", "weight_decay"], StartCheckpoint(str(path))
    assert check_checkpoint_fits(Model(torch.optim.AdamW), start, settings) == {}
    adam = check_checkpoint_fits(Model(torch.optim.Adam), start, settings)  # fits; its default weight decay
    assert adam == {0: {"weight_decay": (0.01, 0)}}
    with pytest.raises(SetupError, match=r"torch.optim.sgd.SGD needs dampening, momentum"):
        check_checkpoint_fits(Model(torch.optim.SGD), start, settings)
    changed = check_checkpoint_fits(Model(partial(torch.optim.AdamW, lr=0.1)), start, settings)
    assert changed == {0: {"lr": (0.001, 0.1)}}
    for group in state["param_groups"]:  # as an older torch saved it, and under a schedule from lr 0.001
        del group["maximize"], group["differentiable"]
        group["initial_lr"], group["lr"] = 0.001, 0.0005
    torch.save({"state_dict": trained.state_dict(), "optimizer_states": [state]}, path)
    start = StartCheckpoint(str(path))  # the file written again
    assert check_checkpoint_fits(Model(torch.optim.AdamW), start, settings) == {}  # the schedule's lr stays
    with pytest.raises(SetupError, match=r"model.optimizer.lr=0.1: the checkpoint .* follows a learning-rate sch"):
        check_checkpoint_fits(Model(partial(torch.optim.AdamW, lr=0.1)), start, settings)


def test_a_sharded_checkpoint_resumes_only_under_the_kind_of_strategy_that_wrote_it(tmp_path):
    from {{ cookiecutter.package_name }}.launch.resume_checks import check_checkpoint_format

    zero, shards, other, single = (tmp_path / name for name in ("zero.ckpt", "shards.ckpt", "other", "one.ckpt"))
    (zero / "checkpoint").mkdir(parents=True)
    (zero / "latest").write_text("checkpoint")
    shards.mkdir()
    (shards / ".metadata").write_bytes(b"")
    other.mkdir()
    single.write_bytes(b"")

    def strategy(name: str, **instance):
        return OmegaConf.create({"name": name, "instance": {"_target_": "x", **instance}})

    for path, name in [(zero, "deepspeed_stage_2"), (shards, "fsdp2"), (single, "ddp"), (None, "ddp")]:
        check_checkpoint_format(path and str(path), strategy(name))
    check_checkpoint_format(str(single), strategy("deepspeed_stage_3", stage=3, load_full_weights=True))
    with pytest.raises(SetupError, match=r"a DeepSpeed checkpoint \(a folder of shards\), which strategy=ddp cannot"):
        check_checkpoint_format(str(zero), strategy("ddp"))
    with pytest.raises(SetupError, match=r"torch.distributed.checkpoint checkpoint .* strategy=deepspeed_stage_3 can"):
        check_checkpoint_format(str(shards), strategy("deepspeed_stage_3"))
    with pytest.raises(SetupError, match=r"a folder, but neither a DeepSpeed nor a sharded"):
        check_checkpoint_format(str(other), strategy("fsdp2"))
    with pytest.raises(SetupError, match=r"one file, and strategy=deepspeed_stage_2 resumes only from DeepSpeed's"):
        check_checkpoint_format(str(single), strategy("deepspeed_stage_2", stage=2))


def test_resume_takes_the_config_of_the_start_that_wrote_its_checkpoint(tmp_path):
    """A start after the newest checkpoint (which failed before it saved) changed nothing: its
    overrides are not the run's. The start before the checkpoint wrote it: its are."""
    from {{ cookiecutter.package_name }}.launch.run_directory import resume_overrides

    run = tmp_path / "run"
    starts = [run / ".hydra", run / ".hydra" / "resumes" / "2026-01-02_00-00-00_2"]
    starts.append(run / ".hydra" / "resumes" / "2026-01-03_00-00-00_3")
    records = [start / "overrides.yaml" for start in starts]
    checkpoint = run / "checkpoints" / "last.ckpt"
    for path in [*records, checkpoint]:
        path.parent.mkdir(parents=True, exist_ok=True)
    for when, (path, batch) in enumerate(zip(records, (16, 32, 64), strict=True)):
        path.write_text(yaml.safe_dump([f"data.batch_size={batch}", "trainer.max_epochs=1"]))
        os.utime(path, (1000 + 10 * when, 1000 + 10 * when))
    torch.save({"global_step": 4}, checkpoint)
    os.utime(checkpoint, (1015, 1015))  # after the second start, before the third
    assert resume_overrides([f"resume={run}", "trainer.max_epochs=3"]) == [
        "data.batch_size=32",
        f"output_root='{tmp_path}'",
        "run_id='run'",
        "ckpt_path='last'",
        "trainer.max_epochs=3",
    ]


def test_resume_takes_a_folder_quoted_for_hydra(tmp_path):
    """resume='/a b/run', quoted as other keys take a path with spaces: the quotes were taken for
    part of the path ("no run was started there")."""
    from {{ cookiecutter.package_name }}.launch.run_directory import resume_overrides

    run = tmp_path / "a b" / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["trainer.max_epochs=1"]))
    (run / "checkpoints").mkdir()
    torch.save({"global_step": 4}, run / "checkpoints" / "last.ckpt")
    for quote in "'\"":
        assert resume_overrides([f"resume={quote}{run}{quote}"]) == resume_overrides([f"resume={run}"])


def test_resume_of_a_run_folder_copied_without_file_times_takes_the_config_of_the_start_that_wrote_it(tmp_path):
    """`cp -r` gives every file the copy's time: the file times told a start that came after the
    newest checkpoint, and resume= took its overrides (here the first start's batch size)."""
    from mnist_ddp.launch.run_directory import resume_overrides

    common = [*FAST, f"output_root={tmp_path}", "run_id=run"]
    run_train(*common, "trainer.max_epochs=1")
    run_train(*common, "ckpt_path=last", "trainer.max_epochs=2", "data.batch_size=16")
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "run", copy, copy_function=shutil.copyfile)  # as `cp -r`: no file times
    for path in copy.rglob("*"):  # the records copied a second after the checkpoints
        os.utime(path, (2000 + (path.name == "overrides.yaml"),) * 2)
    assert "data.batch_size=16" in resume_overrides([f"resume={copy}"])


def test_a_resume_changes_or_drops_a_key_that_its_start_added(tmp_path):
    """`+key=...` at the start, `key=...` at the resume: the saved `+key` was dropped for the new
    value, so the key no longer existed and the resume stopped with "no such key"."""
    from {{ cookiecutter.package_name }}.launch.run_directory import resume_overrides

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    added = ["+callbacks.extra._target_=x.Y", "+callbacks.extra.seconds=1", "++trainer.max_time=null"]
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(added))
    new = ["callbacks.extra.seconds=0", "~callbacks.extra._target_", "trainer.max_time=00:01:00:00"]
    assert resume_overrides([f"resume={run}", *new]) == [
        f"output_root='{tmp_path}'",
        "run_id='run'",
        "ckpt_path=null",  # no checkpoint yet
        "+callbacks.extra.seconds=0",
        "trainer.max_time=00:01:00:00",
    ]


@pytest.mark.parametrize("other", ["run_id=other", "output_root=/elsewhere", "ckpt_path=null", "+ckpt_path=x.ckpt"])
def test_resume_beside_another_place_or_checkpoint_stops_with_one_line(tmp_path, other):
    """Before, resume= dropped these without a word and went on in the run's own folder."""
    from {{ cookiecutter.package_name }}.launch.run_directory import resume_overrides

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["trainer.max_epochs=1"]))
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4}, run / "checkpoints" / "last.ckpt")
    expected = rf"^{re.escape(other)}: resume=\S+ continues that run, in its folder"
    with pytest.raises(SetupError, match=expected) as error:
        resume_overrides([f"resume={run}", other])
    assert f"Fix: leave {other.lstrip('+').split('=')[0]} out; or start a new run" in str(error.value)
    same = ["run_id=run", f"output_root={tmp_path}/", "ckpt_path=last"]  # what resume= sets anyway: taken
    placed = resume_overrides([f"resume={run}", *same])[1:4]
    assert placed == [f"output_root='{tmp_path}'", "run_id='run'", "ckpt_path='last'"]
    shown = resume_overrides([f"resume={run}", "trainer.max_epochs=2", "--cfg", "job"])  # Hydra's options first
    assert shown[:2] == ["--cfg", "job"] and shown[-1] == "trainer.max_epochs=2"
    with pytest.raises(SetupError, match=r"^resume='': the folder of the run to continue. Fix: resume=outputs/"):
        resume_overrides(["resume="])
    with pytest.raises(SetupError, match=rf"^resume={run} resume=b: one run at a time. Fix: one of them, e.g. resume="):
        resume_overrides([f"resume={run}", "resume=b"])  # the last one was resumed without a word


def test_resume_of_a_checkpoint_file_names_its_runs_folder(tmp_path, monkeypatch):
    """Its line named the checkpoints/ folder's runs ("none") as the fix."""
    from {{ cookiecutter.package_name }}.launch.run_directory import resume_overrides

    monkeypatch.chdir(tmp_path)
    (tmp_path / "run" / ".hydra").mkdir(parents=True)
    (tmp_path / "run" / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["trainer.max_epochs=1"]))
    checkpoint = Path("run/checkpoints/last.ckpt")
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4}, checkpoint)
    with pytest.raises(SetupError) as error:
        resume_overrides([f"resume={checkpoint}"])
    assert str(error.value) == (
        "resume=run/checkpoints/last.ckpt: inside the run run, not its folder. Fix: resume=run, or a new run from "
        "this checkpoint: ckpt_path=run/checkpoints/last.ckpt"
    )
    folder = r"^resume=run/checkpoints: inside the run run, not its folder\. Fix: resume=run$"
    with pytest.raises(SetupError, match=folder):
        resume_overrides(["resume=run/checkpoints"])
    # the output root, and a folder that holds no run: before, the line named the parent's runs as the fix
    runs = r"^resume=\.: a folder of runs, not a run\. Fix: resume=<run_id>, one of: run$"
    with pytest.raises(SetupError, match=runs):
        resume_overrides(["resume=."])
    spaced = tmp_path / "my run" / "checkpoints" / "last.ckpt"  # each name as typed in a shell
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4}, spaced)
    with pytest.raises(SetupError, match=r"Fix: resume=<run_id>, one of: 'my run', run$"):
        resume_overrides(["resume=."])
    shutil.rmtree(spaced.parent.parent)
    nowhere = r"^resume=new/nowhere: no run was started there \(\S+ is missing\)\. Fix: a run's folder \(new holds"
    with pytest.raises(SetupError, match=nowhere):
        resume_overrides(["resume=new/nowhere"])
    # the run's id for its folder: the fix named no run ("." holds none with checkpoints)
    (tmp_path / "outputs").mkdir()
    (tmp_path / "run").rename(tmp_path / "outputs" / "r1")
    in_outputs = r"^resume=r1: no run was started there; outputs/r1 is that run\. Fix: resume=outputs/r1$"
    with pytest.raises(SetupError, match=in_outputs):
        resume_overrides(["resume=r1"])


@pytest.mark.parametrize("name", ["run (1)", "a,b", "1e3", "it's", "ünï"])
def test_resume_continues_a_run_whose_folder_name_hydra_would_read_otherwise(tmp_path, name):
    """Before: `run (1)` and `a,b` were Hydra parse errors or sweeps, `1e3` a float."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from {{ cookiecutter.package_name }}.launch.run_directory import resume_overrides

    run = tmp_path / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["trainer.max_epochs=1"]))
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4}, run / "checkpoints" / "last.ckpt")
    parsed = OverridesParser.create().parse_overrides(resume_overrides([f"resume={run}"]))
    assert {override.key_or_group: override.value() for override in parsed} == {
        "trainer.max_epochs": 1,
        "output_root": str(tmp_path),
        "run_id": name,
        "ckpt_path": "last",
    }


def test_resume_of_a_run_stopped_before_its_first_checkpoint_starts_it_again(tmp_path, capsys):
    """It said to resume, then refused: "ckpt_path=last, but ... holds no checkpoint" (typed by resume=)."""
    from {{ cookiecutter.package_name }}.launch.run_directory import resume_overrides

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["trainer.max_epochs=1"]))
    assert resume_overrides([f"resume={run}"])[-1] == "ckpt_path=null"
    assert "no checkpoint there yet, so the run starts again from its beginning" in capsys.readouterr().err
    with pytest.raises(SetupError, match=r"^resume=\S+ with -m: a resume continues one run in its folder"):
        resume_overrides([f"resume={run}", "-m", "seed=1,2"])
    # a run that started from a checkpoint (fine-tuning) starts from it again: before, from new weights
    given = tmp_path / "pretrained" / "epoch=1-step=10.ckpt"
    quoted = f"ckpt_path='{given}'"  # as a path with = must be written for Hydra
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["trainer.max_epochs=1", quoted]))
    assert resume_overrides([f"resume={run}"])[-1] == quoted
    assert f"starts again from its beginning (from {given}, as it did)" in capsys.readouterr().err


def test_an_unreadable_newest_checkpoint_stops_with_one_line(tmp_path, monkeypatch):
    """A cut-short last.ckpt (a disk that filled up, a copy stopped halfway), and no other: before,
    torch's traceback once the start's config was recorded."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(SetupError, match=r"last.ckpt, the newest checkpoint of \S+, cannot be read"):
        checkpoint_to_resume("last", run, None)
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # a requeued job, which resumes by itself
    with pytest.raises(SetupError, match=r"cannot be read \(cut short, or not a checkpoint\), and the run has no"):
        checkpoint_to_resume(None, run, None)


def test_a_resume_past_an_unreadable_last_checkpoint_says_so(tmp_path, capsys):
    """last.ckpt cut short, the best checkpoint whole: the run went on from the best one, and nothing
    said that last.ckpt was passed over (with the steps trained after the best one)."""
    run = tmp_path / "run"
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 64}, run / "checkpoints" / "epoch=0-step=64.ckpt")
    (run / "checkpoints" / "last.ckpt").write_bytes(b"PK\x03\x04 cut short")
    assert checkpoint_to_resume("last", run, None) == str(run / "checkpoints" / "epoch=0-step=64.ckpt")
    (line,) = capsys.readouterr().err.splitlines()
    best = run / "checkpoints" / "epoch=0-step=64.ckpt"
    said = f"last.ckpt cannot be read (cut short, or not a checkpoint): the run goes on from {best} (step 64), the"
    assert said in line and line.endswith("the newest that can be")


def test_a_resume_of_a_run_that_used_up_its_max_time_stops_with_one_line(tmp_path):
    """Lightning's Timer counts the whole run's time across resumes: such a resume ended at once,
    exit 0, having done nothing (and so would every requeue)."""
    from pytorch_lightning.callbacks import Timer

    from {{ cookiecutter.package_name }}.launch.resume_checks import StartCheckpoint, check_time_left

    checkpoint = tmp_path / "last.ckpt"
    torch.save({"callbacks": {"Timer": {"time_elapsed": {"train": 7.2}}}, "global_step": 9}, checkpoint)
    trainer, start = SimpleNamespace(callbacks=[Timer(duration="00:00:00:06")]), StartCheckpoint(str(checkpoint))
    expected = r"^trainer.max_time: the run has trained 0:00:07 of its 0:00:06 already .*Fix: a larger \+trainer"
    with pytest.raises(SetupError, match=expected):
        check_time_left(trainer, start)
    check_time_left(SimpleNamespace(callbacks=[Timer(duration="00:00:00:10")]), start)  # time left
    check_time_left(SimpleNamespace(callbacks=[]), start)  # no limit


def test_a_resume_with_no_epochs_or_steps_left_stops_with_one_line(tmp_path):
    """Fewer max_epochs than the run has trained: Lightning's traceback ("You restored a checkpoint
    with current_epoch=4, but you have set Trainer(max_epochs=1)"); as many: exit 0, nothing done."""
    from {{ cookiecutter.package_name }}.launch.resume_checks import StartCheckpoint, check_epochs_left

    checkpoint = tmp_path / "last.ckpt"
    progress = {"ready": 5, "started": 5, "processed": 4, "completed": 4}  # stopped in its fifth epoch
    state = {"global_step": 18, "loops": {"fit_loop": {"epoch_progress": {"current": progress}}}}
    torch.save(state, checkpoint)
    with pytest.raises(SetupError, match=r"^trainer.max_epochs=1: the run has trained 4 epoch\(s\), 18 step\(s\) "):
        check_epochs_left(SimpleNamespace(max_epochs=1, max_steps=-1), StartCheckpoint(str(checkpoint)))
    with pytest.raises(SetupError, match=r"^trainer.max_epochs=4: .* Fix: trainer.max_epochs=5 or more$"):
        check_epochs_left(SimpleNamespace(max_epochs=4, max_steps=-1), StartCheckpoint(str(checkpoint)))
    with pytest.raises(SetupError, match=r"^trainer.max_steps=18: .* Fix: \+trainer.max_steps=19 or more"):
        check_epochs_left(SimpleNamespace(max_epochs=None, max_steps=18), StartCheckpoint(str(checkpoint)))
    check_epochs_left(SimpleNamespace(max_epochs=5, max_steps=19), StartCheckpoint(str(checkpoint)))  # left: goes on
    check_epochs_left(SimpleNamespace(max_epochs=-1, max_steps=-1), StartCheckpoint(str(checkpoint)))  # no limits
    check_epochs_left(SimpleNamespace(max_epochs=1, max_steps=-1), StartCheckpoint(None))  # a new run


SHARDED_STATE = {  # where a sharded checkpoint's folder keeps its training state (step, epoch, loops)
    "deepspeed": "checkpoint/mp_rank_00_model_states.pt",
    "deepspeed-zero3": "checkpoint/zero_pp_rank_0_mp_rank_00_model_states.pt",
    "fsdp": "meta.pt",
}


@pytest.mark.parametrize("inside", SHARDED_STATE.values(), ids=SHARDED_STATE)
def test_the_resume_checks_read_a_sharded_checkpoints_state(tmp_path, inside):
    """Before, they read files only: a resume of a finished DeepSpeed or FSDP2 run exited 0 having
    trained nothing, one with fewer epochs ended in Lightning's traceback; and the step of a
    ZeRO-3 or FSDP2 checkpoint read -1 (the newest was chosen by file time alone)."""
    from {{ cookiecutter.package_name }}.callbacks.checkpoints import checkpoint_step
    from {{ cookiecutter.package_name }}.launch.resume_checks import StartCheckpoint, check_epochs_left

    folder = tmp_path / "last.ckpt"
    (folder / inside).parent.mkdir(parents=True, exist_ok=True)
    progress = {"ready": 5, "started": 5, "processed": 4, "completed": 4}
    torch.save({"global_step": 18, "loops": {"fit_loop": {"epoch_progress": {"current": progress}}}}, folder / inside)
    assert checkpoint_step(folder) == 18
    with pytest.raises(SetupError, match=r"^trainer.max_epochs=4: the run has trained 4 epoch\(s\), 18 step\(s\) "):
        check_epochs_left(SimpleNamespace(max_epochs=4, max_steps=-1), StartCheckpoint(str(folder)))
    check_epochs_left(SimpleNamespace(max_epochs=5, max_steps=-1), StartCheckpoint(str(folder)))  # left: goes on


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # torch's words for one process saving
@pytest.mark.parametrize("layout", ["deepspeed", "deepspeed-zero3", "fsdp"])
def test_a_sharded_checkpoint_that_does_not_fit_the_model_stops_with_one_line(tmp_path, layout):
    """Read from what describes the shards, no tensor loaded. Before, a resume of a DeepSpeed or
    FSDP2 run with another model (model=autoencoder) ended in tracebacks from every rank."""
    import torch.distributed.checkpoint as dcp
    from torch import nn

    from {{ cookiecutter.package_name }}.launch.resume_checks import StartCheckpoint, check_checkpoint_fits

    class Model(nn.Module):  # what the check uses of a LightningModule
        strict_loading = True

        def __init__(self, width):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, width), nn.BatchNorm1d(width))

    trained, folder = Model(4).state_dict(), tmp_path / "last.ckpt"
    if layout == "fsdp":  # torch.distributed.checkpoint, as Lightning's FSDP2 writes it
        dcp.save({"state_dict": trained}, storage_writer=dcp.FileSystemWriter(str(folder)))
    else:
        (folder / "checkpoint").mkdir(parents=True)
        if layout == "deepspeed":
            states, name = {"module": trained}, "mp_rank_00_model_states.pt"
        else:  # ZeRO-3: each rank's module holds empty parameters, their shapes are listed apart
            parameters = dict(Model(4).named_parameters())
            module = {key: torch.empty(0) if key in parameters else value for key, value in trained.items()}
            states = {"module": module, "param_shapes": [{key: value.shape for key, value in parameters.items()}]}
            name = "zero_pp_rank_0_mp_rank_00_model_states.pt"
        torch.save({"global_step": 4, **states}, folder / "checkpoint" / name)
    assert check_checkpoint_fits(Model(4), StartCheckpoint(str(folder)), ["lr"]) == {}  # it fits: goes on
    expected = (
        r"its weights do not fit the model this config builds \(\d+ differ; net.0.weight: \[4, 3\] there, \[5, 3\] here"
    )
    with pytest.raises(SetupError, match=expected):
        check_checkpoint_fits(Model(5), StartCheckpoint(str(folder)), ["lr"])


def test_a_deepspeed_checkpoint_resumes_only_on_as_many_processes(tmp_path):
    """With another number DeepSpeed stopped inside fit with a traceback ("used a DP world size
    of 2 but the current world size is 1")."""
    from {{ cookiecutter.package_name }}.launch.resume_checks import StartCheckpoint, check_deepspeed_world_size

    folder = tmp_path / "last.ckpt"
    (folder / "checkpoint").mkdir(parents=True)
    torch.save({"global_step": 8, "dp_world_size": 2}, folder / "checkpoint" / "mp_rank_00_model_states.pt")
    expected = (
        rf"^ckpt_path={re.escape(str(folder))}: a DeepSpeed checkpoint of 2 processes, and this run has 1: "
        r"DeepSpeed resumes its shards only on as many. Fix: resume on 2 processes \(trainer.devices, "
        r"trainer.num_nodes\), or make it one file \(python -m \S+.convert_zero_checkpoint "
    )
    with pytest.raises(SetupError, match=expected):
        check_deepspeed_world_size(SimpleNamespace(world_size=1), StartCheckpoint(str(folder)))
    check_deepspeed_world_size(SimpleNamespace(world_size=2), StartCheckpoint(str(folder)))  # as many: goes on
    check_deepspeed_world_size(SimpleNamespace(world_size=1), StartCheckpoint(None))  # a new run


def test_a_relative_path_to_the_newest_checkpoint_is_that_checkpoint(tmp_path, monkeypatch):
    """`ckpt_path=../out/run/checkpoints/last.ckpt` was refused as another checkpoint than the newest."""
    run = tmp_path / "out" / "run"
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4}, run / "checkpoints" / "last.ckpt")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    relative = "../out/run/checkpoints/last.ckpt"
    assert checkpoint_to_resume(relative, run, None) == relative


def test_a_restarted_run_resumes_by_itself_from_the_newest_checkpoint(tmp_path):
    """Case 4 and 5 without Slurm: a restart (torchrun's count here; Slurm's in
    test_slurm_jobs.py) resumes in place, from the newest checkpoint, not a stale hpc one."""
    run = tmp_path / "run"
    run_train(*FAST, f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=2")
    stale = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    stale["global_step"], stale["epoch"] = 4, 0
    torch.save(stale, run / "hpc_ckpt_1.ckpt")  # older work, newer file
    assert newest_checkpoint(run)[1] == 8
    restart = project_env(TORCHELASTIC_RESTART_COUNT="1")
    result = train(f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=3", env=restart)
    assert result.returncode == 0, result.stderr
    last = run / "checkpoints" / "last.ckpt"
    assert f"Restoring states from the checkpoint path at {last}" in result.stdout + result.stderr
    assert step_of(run / "checkpoints" / "last.ckpt") == 12


@pytest.mark.parametrize("test_after_fit", [True, False])
def test_a_restart_after_the_training_ended_does_what_is_left_and_exits_0(tmp_path, test_after_fit):
    """A requeue after the training's end (a node failed while test_after_fit tested) was
    refused by the epochs check: exit 2, the job FAILED, and the test never ran."""
    run = tmp_path / "run"
    start = [f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=1", f"test_after_fit={test_after_fit}"]
    run_train(*FAST, *start)
    trained = (run / "checkpoints" / "last.ckpt").stat().st_mtime_ns
    result = train(*start, env=project_env(TORCHELASTIC_RESTART_COUNT="1"))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    left = "testing its weights" if test_after_fit else "nothing left to do"
    assert f"Restarted after the training had ended ({run / 'checkpoints' / 'last.ckpt'}): {left}" in output
    assert ("test/acc" in output) == test_after_fit, output  # Lightning's table of the test's results
    assert (run / "checkpoints" / "last.ckpt").stat().st_mtime_ns == trained  # nothing trained, nothing saved
    assert "ERROR" not in output


EARLY_STOP = [  # stops at the first validation: no val/loss is 100 better than the last
    "+callbacks.early._target_=pytorch_lightning.callbacks.EarlyStopping",
    "+callbacks.early.monitor=val/loss",
    "+callbacks.early.patience=0",
    "+callbacks.early.min_delta=100",
]


@pytest.mark.parametrize("how", ["resume", "restart"])
def test_a_run_ended_early_by_a_callback_is_only_tested_by_a_resume_or_restart_to_test(tmp_path, how):
    """EarlyStopping ends the training before max_epochs. Before, the printed "Nothing is left to
    train; to test: ... test_after_fit=true" (a stop while it tested), and a requeue while it
    tested, trained on from it and replaced the early-stopped checkpoints."""
    run = tmp_path / "run"
    start = [f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=5", *EARLY_STOP]
    run_train(*FAST, *start)
    last = run / "checkpoints" / "last.ckpt"
    assert step_of(last) < 5 * 4 and torch.load(last, weights_only=False)["stopped_early"] is True
    trained = {path.name: path.stat().st_mtime_ns for path in (run / "checkpoints").iterdir()}
    if how == "resume":
        result = train(f"resume={run}", "test_after_fit=true")
        said = "Resumed (a resume without test_after_fit=true trains on) after the training had ended"
    else:
        result = train(*start, "test_after_fit=true", env=project_env(TORCHELASTIC_RESTART_COUNT="1"))
        said = "Restarted after the training had ended"
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"{said} ({last}): testing its weights" in output
    assert "test/acc" in output  # Lightning's table of the test's results
    assert {path.name: path.stat().st_mtime_ns for path in (run / "checkpoints").iterdir()} == trained


def test_a_stop_in_a_resumes_sanity_check_keeps_the_checkpoint_it_resumes(tmp_path):
    """Nothing is trained before the sanity check. Before, a stop there saved last.ckpt again at
    its step, with the sanity check's loop state, a new start's random states and no loader
    position: a resume from it trained otherwise than the run would have."""
    run = tmp_path / "run"
    samples = "data.num_samples=1024"  # 2 validation batches (of 102 samples): the stop comes inside the check
    run_train(*FAST, f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=1", samples)
    last = run / "checkpoints" / "last.ckpt"
    saved = last.read_bytes()
    stop = ["+callbacks.signal._target_=tests.helpers.SignalInSanityCheck", "trainer.num_sanity_val_steps=2"]
    result = train(f"resume={run}", "trainer.max_epochs=2", samples, *stop)
    assert result.returncode == 143, result.stdout + result.stderr
    assert f"Stopped by SIGTERM at step {step_of(last)}: newest {last}. Resume: " in result.stderr
    assert last.read_bytes() == saved


def test_a_sigterm_at_the_trainings_last_save_stops_before_the_test(tmp_path):
    """Lightning's handler took it there (SaveOnStop's had ended with the training): the whole test
    ran, and the run exited 0."""
    run = tmp_path / "run"
    stop = ["+callbacks.signal._target_=tests.helpers.SignalAtTrainingEnd", "test_after_fit=true"]
    result = train(f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=1", *stop)
    assert result.returncode == 143, result.stdout + result.stderr
    last = run / "checkpoints" / "last.ckpt"
    assert f"after the training's end: newest {last}. Nothing is left to train; to test: " in result.stderr
    assert "test/acc" not in result.stdout + result.stderr and step_of(last) == 4


def test_a_sigterm_without_the_save_on_stop_callback_exits_143(tmp_path):
    """~callbacks.save_on_stop: Lightning's own handling exited 0, as if the run had finished."""
    stop = ["+callbacks.signal._target_=tests.helpers.SignalInSanityCheck", "trainer.num_sanity_val_steps=2"]
    result = train(f"output_root={tmp_path}", "run_id=run", "~callbacks.save_on_stop", "data.num_samples=1024", *stop)
    assert result.returncode == 143, result.stdout + result.stderr
    assert "Stopped by SIGTERM (nothing saved: callbacks.save_on_stop is left out)" in result.stderr


# ------------------------------------------------------------------ checkpoint writes

KILL_DURING_WRITE = """
import os, signal, sys
import torch
from {{ cookiecutter.package_name }}.callbacks.checkpoints import ForwardOnlyCheckpointIO

class KillWhilePickled:  # pickled in the middle of torch.save, after some bytes are written
    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGKILL)

io = ForwardOnlyCheckpointIO()
io.save_checkpoint({"global_step": 5, "weights": torch.zeros(1000), "then": KillWhilePickled()}, sys.argv[1])
"""


def test_on_a_step_tie_last_ckpt_is_the_newest_whatever_the_file_times(tmp_path):
    """A run copied with `cp -r` (every file the copy's time): a tie between the best checkpoint (saved
    at a validation's end) and last.ckpt (at the training's end, after it) went by the copy's order,
    and a finished run resumed from its best checkpoint, as if an epoch were left."""
    run = tmp_path / "run"
    best, last = run / "checkpoints" / "epoch=1-step=128.ckpt", run / "checkpoints" / "last.ckpt"
    for path in (best, last):
        ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 128}, path)
    os.utime(last, (1000, 1000))  # copied first
    assert newest_checkpoint(run) == (last, 128)
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 160}, best)
    assert newest_checkpoint(run) == (best, 160)  # a higher step wins


def test_a_kill_during_a_checkpoint_write_keeps_the_previous_checkpoint(tmp_path):
    """Killed (SIGKILL) in the middle of writing: last.ckpt is still the previous one and
    loads; the partial file is not a checkpoint, and the next start removes it."""
    run = tmp_path / "run"
    last = run / "checkpoints" / "last.ckpt"
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4, "weights": torch.ones(3)}, last)
    killed = subprocess.run([sys.executable, "-c", KILL_DURING_WRITE, str(last)], env=project_env(), timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert step_of(last) == 4 and torch.load(last, weights_only=False)["weights"].sum() == 3
    assert [p.name for p in (run / "checkpoints").iterdir() if p.name != "last.ckpt"] == ["last.ckpt.partial"]
    assert newest_checkpoint(run) == (last, 4)
    assert checkpoint_to_resume("last", run, None) == str(last)
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["last.ckpt"]


def test_a_save_never_replaces_a_checkpoint_of_a_higher_step(tmp_path):
    path = tmp_path / "last.ckpt"
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 8}, path)
    with pytest.warns(UserWarning, match=r"Not saving .*last.ckpt at step 4: it holds step 8, newer work"):
        ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4}, path)  # another process, older state
    assert step_of(path) == 8
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 9}, path)
    assert step_of(path) == 9


@pytest.mark.parametrize("removed", [[], ["~callbacks.timed_checkpoint"]], ids=["default", "without-timed-saves"])
def test_every_checkpoint_is_written_forward_only_also_without_the_timed_saves(removed, tmp_path):
    """TimedCheckpoint installed the atomic, forward-only writer: a run without the timed saves wrote
    its checkpoints with torch.save in place (cut short by a kill, or over one of a higher step)."""
    from hydra import compose, initialize_config_dir

    from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
    from {{ cookiecutter.package_name }}.launch.warnings import quiet_benign_messages
    from {{ cookiecutter.package_name }}.run import build_trainer

    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=[*FAST, *removed, f"output_dir={tmp_path}"])
    quiet_benign_messages()  # as run.py does before it builds the Trainer (Lightning's srun hint, where srun is)
    io = build_trainer(cfg).strategy.checkpoint_io
    assert isinstance(io, ForwardOnlyCheckpointIO)
    assert io.in_background == (not removed)  # the timed saves' write_in_background (true by default)


def test_background_writes_keep_the_state_of_when_they_were_asked_for(tmp_path):
    """Training goes on while a thread writes: what it changes in place (weights, the optimizer's
    step counts) after the save was asked for is not in the file."""
    from collections import OrderedDict

    weights, counts = torch.zeros(3), torch.tensor(7)
    state_dict = OrderedDict(weights=weights)
    state_dict._metadata = {"": {"version": 1}}  # what nn.Module.state_dict() carries
    io = ForwardOnlyCheckpointIO(in_background=True)
    io.save_checkpoint({"global_step": 1, "state_dict": state_dict, "optimizer": [{"step": counts}]}, tmp_path / "a")
    weights += 5
    counts += 1
    io.wait()
    saved = torch.load(tmp_path / "a", weights_only=False)
    assert saved["state_dict"]["weights"].sum() == 0 and saved["optimizer"][0]["step"] == 7
    assert saved["state_dict"]._metadata == {"": {"version": 1}}


def test_background_writes_and_removals_happen_in_the_order_asked(tmp_path):
    io = ForwardOnlyCheckpointIO(in_background=True)
    best, better = tmp_path / "epoch=1.ckpt", tmp_path / "epoch=2.ckpt"
    io.save_checkpoint({"global_step": 1}, best)
    io.save_checkpoint({"global_step": 2}, better)
    io.remove_checkpoint(best)  # as ModelCheckpoint does: the better one is on disk first
    last = tmp_path / "last.ckpt"
    io.save_checkpoint({"global_step": 8}, last)
    with pytest.warns(UserWarning, match=r"Not saving .*last.ckpt at step 4: it holds step 8, newer work"):
        io.save_checkpoint({"global_step": 4}, last)
        io.wait()
    io.teardown()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["epoch=2.ckpt", "last.ckpt"]
    assert step_of(last) == 8


def test_a_failed_background_write_is_raised(tmp_path):
    io = ForwardOnlyCheckpointIO(in_background=True)
    (tmp_path / "not-a-folder").write_text("")
    io.save_checkpoint({"global_step": 1}, tmp_path / "not-a-folder" / "last.ckpt")
    with pytest.raises(OSError):
        io.wait()  # Lightning's teardown waits: the run fails instead of losing the checkpoint silently


@needs_cuda
def test_the_state_on_the_gpu_is_taken_without_waiting_for_it():
    """Copied in stream order behind the work that makes it (torch raises on a wait): the value
    when the save was asked for, not after the next update."""
    from {{ cookiecutter.package_name }}.callbacks.checkpoints import host_snapshot

    weights = torch.zeros(1000, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        torch.cuda._sleep(10**7)  # the GPU busy: the copy is queued, not done
        weights += 1
        snapshot, arrived = host_snapshot({"weights": weights})
        weights += 1  # the next step's update
    finally:
        torch.cuda.set_sync_debug_mode("default")
    arrived.synchronize()
    assert snapshot["weights"].device.type == "cpu" and snapshot["weights"].sum() == 1000


def test_an_explicit_older_checkpoint_into_a_newer_run_is_refused(tmp_path):
    run = tmp_path / "run"
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 8}, run / "checkpoints" / "last.ckpt")
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4}, run / "hpc_ckpt_1.ckpt")
    with pytest.raises(SetupError, match="newer work would be overwritten"):
        checkpoint_to_resume(str(run / "hpc_ckpt_1.ckpt"), run, None)


def test_a_requeue_of_a_run_started_from_a_checkpoint_file_goes_on_from_its_own_work(tmp_path, monkeypatch, capsys):
    """A requeue repeats the job's ckpt_path=<file> (a run fine-tuned from another): it was refused as
    an older checkpoint into the run ("newer work would be overwritten"), and the job ended at its first
    requeue. The run's own newest checkpoint is taken; before its first save, the file again."""
    base = tmp_path / "base" / "last.ckpt"
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 100}, base)
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"ckpt_path='{base}'", "seed=1"]))  # its start
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert checkpoint_to_resume(str(base), run, None) == str(base)
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 104}, run / "checkpoints" / "last.ckpt")
    assert checkpoint_to_resume(str(base), run, None) == str(run / "checkpoints" / "last.ckpt")
    assert "Restarted: the run goes on from " in capsys.readouterr().err
    other = tmp_path / "other.ckpt"  # another start into this folder, with a count left from a requeue: as before
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 50}, other)
    with pytest.raises(SetupError, match="newer work would be overwritten"):
        checkpoint_to_resume(str(other), run, None)
    monkeypatch.delenv("SLURM_RESTART_COUNT")  # a start by hand into that run: refused, as before
    with pytest.raises(SetupError, match="newer work would be overwritten"):
        checkpoint_to_resume(str(base), run, None)


def test_last_checkpoint_is_also_written_every_n_minutes_mid_epoch(tmp_path):
    """Case 7: besides epoch ends, last.ckpt follows the clock (a tiny interval here)."""
    saves = tmp_path / "saves.txt"
    run_train(
        *FAST,
        f"output_root={tmp_path}",
        "run_id=timed",
        "trainer.max_epochs=1",
        "callbacks.timed_checkpoint.every_minutes=0.0001",
        "callbacks.timed_checkpoint.agree_every_seconds=0.05",
        *record_saves(saves),
    )
    steps = [int(line) for line in saves.read_text().split()]
    assert {1, 2, 3} <= set(steps), steps  # mid-epoch (4 steps per epoch), not only at its end
    assert steps == sorted(steps)


# ------------------------------------------------------------------ signals and exit codes


class CtrlCWhileTesting(pl.Callback):
    """Test-only: Ctrl-C at each test batch's start (test_after_fit=true)."""

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        os.kill(os.getpid(), signal.SIGINT)


class SigtermWhileTesting(pl.Callback):
    """Test-only: SIGTERM at the first test batch (of several: Lightning lets the last one end)."""

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        if batch_idx == 0:
            os.kill(os.getpid(), signal.SIGTERM)


class SigtermAtTheLastValidationsEnd(pl.Callback):
    """Test-only: SIGTERM as the last epoch's validation ends (Lightning stops at that epoch's end)."""

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking and trainer.current_epoch == trainer.max_epochs - 1:
            os.kill(os.getpid(), signal.SIGTERM)


class CtrlCWhileStarting(pl.Callback):
    """Test-only: Ctrl-C while the Trainer is built, before training begins."""

    def __init__(self):
        os.kill(os.getpid(), signal.SIGINT)


# train.py, with Ctrl-C as {module} is imported (the training code: about 5 s of torch and Lightning).
CTRL_C_WHILE_IMPORTING = """
import builtins, os, runpy, signal, sys
real_import = builtins.__import__
def interrupted(name, *args, **kwargs):
    if name == "{module}":
        builtins.__import__ = real_import
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args, **kwargs)
builtins.__import__ = interrupted
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""


@pytest.mark.parametrize(
    ("program", "interrupting"),
    [
        ([str(PROJECT / "train.py")], [f"+callbacks.interrupt._target_={__name__}.CtrlCWhileStarting"]),
        (["-c", CTRL_C_WHILE_IMPORTING.format(module="{{ cookiecutter.package_name }}.run")], []),
    ],
    ids=["while-the-trainer-is-built", "while-the-training-code-is-imported"],
)
def test_ctrl_c_before_training_begins_exits_130_and_leaves_nothing(program, interrupting, tmp_path):
    """Before: KeyboardInterrupt's traceback, and a run folder holding only its .hydra record."""
    run = tmp_path / "run"
    stopped = subprocess.run(
        [sys.executable, *program, *FAST, f"output_root={tmp_path}", "run_id=run", *interrupting],
        cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300,
        preexec_fn=as_in_a_terminal,
    )  # fmt: skip
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr.strip().endswith("Stopped by Ctrl-C before training began: nothing to save"), stopped.stderr
    assert "Traceback" not in stopped.stderr and not run.exists()


def test_ctrl_c_while_train_py_loads_exits_130_with_one_line(tmp_path):
    """Before: KeyboardInterrupt's traceback, exit 1, for a Ctrl-C in train.py's first moments."""
    run = tmp_path / "run"
    stopped = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_IMPORTING.format(module="hydra"), *FAST, f"output_root={tmp_path}",
         "run_id=run"],
        cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300,
        preexec_fn=as_in_a_terminal,
    )  # fmt: skip
    assert (stopped.returncode, stopped.stderr.strip()) == (130, "Stopped by Ctrl-C")
    assert not run.exists()


def test_ctrl_c_while_testing_after_fit_exits_130_and_the_resume_tests(tmp_path):
    """Before: exit 1 (Lightning's own code for an interrupt), as after a crash; and the resume
    command it named was refused (the training had reached max_epochs): the test never ran.
    Four test batches: a stop ends the test at a batch's end, and Lightning lets the last one end."""
    run = tmp_path / "run"
    overrides = [*FAST, f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=1", "test_after_fit=true"]
    overrides.append("data.num_samples=1024")
    callback = f"+callbacks.interrupt._target_={__name__}.CtrlCWhileTesting"
    stopped = subprocess.run(
        [sys.executable, str(PROJECT / "train.py"), *overrides, callback],
        cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300,
        preexec_fn=as_in_a_terminal,
    )  # fmt: skip
    assert stopped.returncode == 130, stopped.stderr
    line = f"Stopped by Ctrl-C at step 4, after the training's end: newest {run / 'checkpoints'}"
    assert line in stopped.stderr, stopped.stderr
    test = f"Nothing is left to train; to test: python train.py resume={run} test_after_fit=true"
    assert test in stopped.stderr, stopped.stderr
    resumed = train(f"resume={run}", "~callbacks.interrupt")  # the run's config holds it
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output
    assert "Resumed (a larger trainer.max_epochs trains on) after the training had ended" in output, output
    assert "testing its weights" in output and "test/acc" in output, output  # Lightning's table of results
    assert step_of(run / "checkpoints" / "last.ckpt") == 4, "trained on"


@pytest.mark.parametrize("only_tests", [False, True], ids=["test-after-fit", "a-resume-that-only-tests"])
def test_sigterm_while_testing_saves_nothing_exits_143_and_names_the_command_that_tests(tmp_path, only_tests):
    """Before: the stop saved last.ckpt again while testing (the same weights, but a new file to
    write in Slurm's grace time, and the loops' state of a test); in a resume that only tests,
    its line said "at step 0" and named a resume command that the epochs check refuses."""
    run, saves = tmp_path / "run", tmp_path / "saves.txt"
    four_test_batches = "data.num_samples=1024"  # also in the resume: train() passes FAST's again
    start = [f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=1", four_test_batches]
    term = f"+callbacks.term._target_={__name__}.SigtermWhileTesting"
    if only_tests:
        assert train(*start).returncode == 0
        before = snapshot(run / "checkpoints")
        stopped = train(f"resume={run}", four_test_batches, "test_after_fit=true", term, *record_saves(saves))
        assert snapshot(run / "checkpoints") == before and not saves.exists(), "saved while testing"
    else:
        stopped = train(*start, "test_after_fit=true", term, *record_saves(saves))
        # The epoch's end alone (its checkpoint and last.ckpt); a stop's save leaves a .stopping marker.
        assert saves.read_text().split() == ["4", "4"] and not Path(f"{saves}.stopping").exists(), "saved while testing"
    assert stopped.returncode == 143, stopped.stderr
    line = f"Stopped by SIGTERM at step 4, after the training's end: newest {run / 'checkpoints' / 'last.ckpt'}. "
    line += f"Nothing is left to train; to test: python train.py resume={run} test_after_fit=true"
    assert line in stopped.stderr and "Traceback" not in stopped.stderr, stopped.stderr
    # The run's config holds what the start that wrote its checkpoint added (not a resume's)
    added = [] if only_tests else ["~callbacks.term", "~callbacks.saves"]
    tested = train(f"resume={run}", "test_after_fit=true", *added)
    assert tested.returncode == 0 and "test/acc" in tested.stdout + tested.stderr, tested.stderr


def test_a_stop_at_the_last_epochs_end_names_the_command_that_tests_not_a_resume(tmp_path):
    """The stop saved after the last epoch and named a resume command, which the epochs check
    refused: nothing was left to train. Its line now says so, and names the command that tests
    the weights, which works."""
    run = tmp_path / "run"
    overrides = [f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=2"]
    stopped = train(*overrides, f"+callbacks.term._target_={__name__}.SigtermAtTheLastValidationsEnd")
    assert stopped.returncode == 143, stopped.stderr
    line = f"Stopped by SIGTERM at step 8, after the training's end: saved {run / 'checkpoints' / 'last.ckpt'}. "
    line += f"Nothing is left to train; to test: python train.py resume={run} test_after_fit=true"
    assert line in stopped.stderr, stopped.stderr
    tested = train(f"resume={run}", "test_after_fit=true", "~callbacks.term")  # the run's config holds it
    assert tested.returncode == 0, tested.stderr
    assert "test/acc" in tested.stdout + tested.stderr and step_of(run / "checkpoints" / "last.ckpt") == 8


@pytest.mark.parametrize(("signum", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_a_stop_mid_training_saves_and_exits_non_zero_with_the_resume_command(tmp_path, signum, code, name):
    """Case 6: SIGTERM (time limit, scancel) and Ctrl-C mid-epoch: saved, exit 143 / 130,
    one line naming the checkpoint and the resume command; resuming continues from there."""
    saves = tmp_path / "saves.txt"
    run = tmp_path / "run"
    process = start_until_first_checkpoint(run, "trainer.max_epochs=20", *record_saves(saves, seconds_per_step=0.3))
    time.sleep(0.5)  # into the second epoch
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == code, stderr
    line = next(line for line in stderr.splitlines() if line.startswith(f"Stopped by {name}"))
    saved = step_of(run / "checkpoints" / "last.ckpt")
    assert f"at step {saved}: saved {run / 'checkpoints' / 'last.ckpt'}. Resume: python train.py resume={run}" in line
    steps = [int(s) for s in saves.read_text().split()]
    assert steps == sorted(steps) and steps[-1] == saved and 4 < saved < 80
    epochs = saved // 4 + 2  # one more epoch after the one that was stopped
    resumed = subprocess.run(
        [sys.executable, str(PROJECT / "train.py"), f"resume={run}", f"trainer.max_epochs={epochs}"],
        cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert step_of(run / "checkpoints" / "last.ckpt") == epochs * 4
    steps = [int(s) for s in saves.read_text().split()]
    assert steps == sorted(steps), "global_step went back"


def test_a_second_ctrl_c_during_the_stops_save_exits_130_and_the_run_resumes(tmp_path):
    """The second Ctrl-C came while the first's save was written (6 s here: a large model):
    before, it was taken for a Ctrl-C before training began, the line said "nothing to save"
    and the start's config (.hydra/) was removed, so `resume=` no longer found the run."""
    run = tmp_path / "run"
    saves = record_saves(tmp_path / "saves.txt", seconds_per_step=0.3, stop_save_seconds=6)
    process = start_until_first_checkpoint(run, "trainer.max_epochs=20", *saves)
    time.sleep(0.5)  # into the second epoch
    process.send_signal(signal.SIGINT)
    stopping = tmp_path / "saves.txt.stopping"  # the stop's save has begun (at the step's end)
    wait_until_written(stopping, process, seconds=60)
    assert stopping.exists(), "the stop's save did not begin"
    time.sleep(1)  # into the save's 6 s
    process.send_signal(signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 130, stderr
    newest = newest_checkpoint(run)[1]  # the save cut short left the one before whole
    line = next(line for line in stderr.splitlines() if line.startswith("Stopped by Ctrl-C"))
    assert f": newest {run / 'checkpoints'}" in line and f"resume={run}" in line, line
    stopped_at = int(re.search(r"at step (\d+)", line).group(1))
    assert f"(step {newest}: the {stopped_at - newest} step(s) since are lost)" in line, line  # it said step 24 alone
    assert (run / ".hydra" / "overrides.yaml").is_file() and "Traceback" not in stderr
    resumed = subprocess.run(
        [sys.executable, str(PROJECT / "train.py"), f"resume={run}", f"trainer.max_epochs={newest // 4 + 1}"],
        cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert step_of(run / "checkpoints" / "last.ckpt") == (newest // 4 + 1) * 4


def test_a_second_ctrl_c_while_the_stops_file_is_written_names_that_file(tmp_path):
    """The second Ctrl-C came while the writer thread wrote the stop's file (the state already
    taken): the line named the checkpoint before and said the steps since were lost, but the
    writer went on, and the file was whole on disk as the process ended."""
    run = tmp_path / "run"
    saves = record_saves(tmp_path / "saves.txt", seconds_per_step=0.3, stop_write_seconds=4)
    process = start_until_first_checkpoint(run, "trainer.max_epochs=20", *saves)
    time.sleep(0.5)  # into the second epoch
    process.send_signal(signal.SIGINT)
    stopping = tmp_path / "saves.txt.stopping"  # the stop's save has begun (at the step's end)
    wait_until_written(stopping, process, seconds=60)
    assert stopping.exists(), "the stop's save did not begin"
    time.sleep(1)  # into the file's 4 s
    process.send_signal(signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 130, stderr
    line = next(line for line in stderr.splitlines() if line.startswith("Stopped by Ctrl-C"))
    stopped_at = int(re.search(r"at step (\d+)", line).group(1))
    assert step_of(run / "checkpoints" / "last.ckpt") == stopped_at
    assert f": newest {run / 'checkpoints' / 'last.ckpt'}. Resume: " in line and "lost" not in line, line


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_stop_during_validation_resumes_with_that_whole_validation(tmp_path, ranks):
    """Lightning 2.6 resumed a checkpoint saved at a validation batch's end past the rest of
    that validation: the epoch's validation metrics, the best checkpoint they choose and that
    epoch's checkpoint were lost. Now the resume runs that validation again, from its start."""
    run, validations = tmp_path / "run", tmp_path / "validations.txt"
    overrides = ["data.num_samples=4096", "trainer.limit_val_batches=16", "trainer.max_epochs=2"]
    overrides += record_validations(validations, seconds_per_batch=0.5)
    # Two ranks agree on the stop at every batch here: at their own pace (about once a second),
    # the agreement could fall on the validation's last batch, which Lightning lets end.
    two = ["strategy=ddp", "trainer.devices=2", "callbacks.save_on_stop.agree_every_seconds=0.001"]
    overrides += two if ranks == 2 else []
    process = start_until(tmp_path / "validations.txt.began", run, *overrides, own_group=True)
    os.killpg(process.pid, signal.SIGTERM)  # in the first epoch's validation
    _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 143, stderr
    assert f"Stopped by SIGTERM at step 4: saved {run / 'checkpoints' / 'last.ckpt'}" in stderr, stderr
    assert not validations.exists(), "the validation was not cut off"
    resumed = subprocess.run(
        [sys.executable, str(PROJECT / "train.py"), f"resume={run}", "callbacks.validations.seconds_per_batch=0"],
        cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert validations.read_text().split() == ["0", "1"], "a validation was skipped"
    assert step_of(run / "checkpoints" / "last.ckpt") == 8, "training steps lost or trained twice"


def test_a_second_start_of_a_run_that_is_still_training_stops_with_one_line(tmp_path):
    """Two resumes of one run at once: before, both trained, and each overwrote the other's
    last.ckpt, one with an older step. The second now stops, changes nothing, and can start
    once the first has ended (the lock goes with the process, also when it is killed)."""
    run = tmp_path / "run"
    process = start_until_first_checkpoint(run, "trainer.max_epochs=40", *record_saves(tmp_path / "s", 0.3))
    before = snapshot(run / ".hydra")
    second = train(f"resume={run}", "trainer.max_epochs=41")
    assert second.returncode == 2, second.stderr
    (line,) = [line for line in second.stderr.splitlines() if line.strip()][-1:]
    assert line.startswith(f"ERROR: run directory {run} is in use: another start of this run is still training"), line
    assert f"Fix: wait for it to end, or stop it and then `python train.py resume={run}`" in line
    assert "Traceback" not in second.stderr and snapshot(run / ".hydra") == before
    assert process.poll() is None, "the first start should train on"
    process.kill()
    process.communicate(timeout=60)
    # The resume starts from the newest checkpoint: the kill may fall between an epoch's
    # checkpoint and last.ckpt's copy of it. 4 steps an epoch: one more.
    epochs = newest_checkpoint(run)[1] // 4 + 1
    resumed = train(f"resume={run}", f"trainer.max_epochs={epochs}")
    assert resumed.returncode == 0, resumed.stderr


HOLD_THE_LOCK = """
import fcntl, os, sys, time
descriptor = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(descriptor, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


def test_a_start_into_a_run_directory_held_by_another_writes_its_record_apart(tmp_path):
    """Two new starts of one run_id at once (an array job's tasks): both wrote .hydra before either
    took the lock, and the refused one then removed .hydra, the record of the run that trained
    ("no run was started there" for its resume=). The lock is now taken before the record is written."""
    from {{ cookiecutter.package_name }}.launch.run_directory import output_subdir

    held, free = tmp_path / "held", tmp_path / "free"
    held.mkdir()
    free.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert output_subdir(str(held)).startswith(".hydra/resumes/"), "the other start's is .hydra"
        assert output_subdir(str(free)) == ".hydra"
        refused = train(f"output_root={tmp_path}", "run_id=held")
        assert refused.returncode == 2 and " is in use: another start" in refused.stderr, refused.stderr
        assert list(held.iterdir()) == []
    finally:
        holder.kill()
        holder.wait()


def test_the_run_directory_lock_is_skipped_where_the_file_system_has_none(tmp_path, monkeypatch):
    """Some network file systems refuse flock: the start goes on unlocked, as before."""
    import errno
    import fcntl

    from {{ cookiecutter.package_name }}.launch import run_directory

    def no_locks(descriptor, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert run_directory.hold(tmp_path) and tmp_path.absolute() not in run_directory._held


# ------------------------------------------------------------------ a checkpoint that cannot be written


def disk_full_save(*args, **kwargs):
    """torch.save on a full disk: its writer's RuntimeError, ENOSPC in the chain."""
    try:
        raise OSError(28, "No space left on device")
    except OSError:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 9685504 vs 9685392") from None


class DiskFullFromStep(pl.Callback):
    """Test-only: every checkpoint write from a training step on fails as on a full disk."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step >= self.step:
            torch.save = disk_full_save


def test_a_checkpoint_that_cannot_be_written_leaves_the_earlier_whole_and_no_partial_file(tmp_path, monkeypatch):
    last = tmp_path / "checkpoints" / "last.ckpt"
    io = ForwardOnlyCheckpointIO()
    io.save_checkpoint({"global_step": 4}, last)
    monkeypatch.setattr(torch, "save", lambda checkpoint, file: (file.write(b"half"), disk_full_save()))
    with pytest.raises(CheckpointNotWritten, match=r"last.ckpt could not be written at step 8: No space left on dev"):
        io.save_checkpoint({"global_step": 8}, last)
    assert step_of(last) == 4 and sorted(p.name for p in last.parent.iterdir()) == ["last.ckpt"]


class LoggerDiskFullAtStep(pl.Callback):
    """Test-only: a logger's write fails at a step as on a full disk (TensorBoard's event file)."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            raise OSError(28, "No space left on device", "tensorboard/events.out.tfevents")


def test_a_loggers_file_that_cannot_be_written_stops_with_one_line(tmp_path):
    """Before: the logger's OSError traceback, where a checkpoint's was one line."""
    run = tmp_path / "run"
    failing = [f"+callbacks.disk_full._target_={__name__}.LoggerDiskFullAtStep", "+callbacks.disk_full.step=6"]
    result = train(f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=3", *failing)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line == (
        "ERROR: tensorboard/events.out.tfevents could not be written (No space left on device). The checkpoints "
        f"written before it are whole. Fix: free space (or write access), then python train.py resume={run}"
    ), line
    assert step_of(run / "checkpoints" / "last.ckpt") == 4


def test_after_a_background_write_failed_nothing_asked_after_it_is_done(tmp_path, monkeypatch):
    """On a full disk the new best's write failed, and the removal of the old best, queued behind
    it, still ran: the run was left without a best checkpoint (last.ckpt named one never written)."""
    old_best = tmp_path / "checkpoints" / "epoch=0-step=4.ckpt"
    io = ForwardOnlyCheckpointIO(in_background=True)
    io.save_checkpoint({"global_step": 4}, old_best)
    io.wait()
    asked = threading.Event()

    def fails_once_all_is_asked(checkpoint, file):
        asked.wait(timeout=60)
        disk_full_save()

    monkeypatch.setattr(torch, "save", fails_once_all_is_asked)
    io.save_checkpoint({"global_step": 8}, old_best.with_name("epoch=1-step=8.ckpt"))
    io.remove_checkpoint(old_best)
    asked.set()
    with pytest.raises(CheckpointNotWritten, match=r"epoch=1-step=8.ckpt could not be written at step 8"):
        io.wait()
    io.teardown()
    assert step_of(old_best) == 4 and [path.name for path in old_best.parent.iterdir()] == [old_best.name]


def test_train_py_stops_with_one_line_where_a_checkpoint_cannot_be_written(tmp_path):
    """Before: a traceback ending in "unexpected pos", no resume command, and a .partial file
    that kept the disk full."""
    run = tmp_path / "run"
    failing = [f"+callbacks.disk_full._target_={__name__}.DiskFullFromStep", "+callbacks.disk_full.step=5"]
    result = train(f"output_root={tmp_path}", "run_id=run", "trainer.max_epochs=3", *failing)
    assert result.returncode == 1, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ERROR: {run / 'checkpoints'}/") and " could not be written at step 8: No space " in line
    assert line.endswith(f"The checkpoints written before it are whole. Fix: free space (or write access), then "
                         f"python train.py resume={run}"), line  # fmt: skip
    assert "Traceback" not in result.stderr and step_of(run / "checkpoints" / "last.ckpt") == 4
    assert not list(run.rglob("*.partial"))
