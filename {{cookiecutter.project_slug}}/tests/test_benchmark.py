"""The benchmark and the scaling command run and print well-formed figures.

Short mode: tiny data, a few steps. The figures themselves are not checked: they depend on
the machine (docs/performance.md has measured ones).
"""

import json
import re
import subprocess
import sys

import pytest

from tests.helpers import project_env, write_small_mnist

SHORT = ["--steps=3", "--warmup=1", "--repeats=2", "data.num_samples=256", "data.batch_size=16", "logger=csv"]
CPU = "trainer.accelerator=cpu"  # also where a GPU is: these tests mean the CPU
NUMBER = r"\d+\.\d"
LOADER_LINE = rf"^loader only: {NUMBER} samples/s = {NUMBER}x what training uses \((\d+) worker\(s\) per process\)$"


def run_module(module: str, *args: str, cwd, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", f"{{ cookiecutter.package_name }}.{module}", *args]
    result = subprocess.run(command, cwd=cwd, env=project_env(**env), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def check_report(stdout: str, figures: dict, processes: int, train_samples: int = 256) -> None:
    for way in ("plain", "lightning"):
        assert re.search(rf"^{way} +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} +\d+$", stdout, re.M), stdout
        assert len(figures["ways"][way]["samples_per_sec"]) == 2
        assert all(value > 0 for value in figures["ways"][way]["samples_per_sec"])
    assert re.search(rf"^ratio lightning/plain: {NUMBER}+ \(median of 2 paired repeats", stdout, re.M), stdout
    assert re.search(LOADER_LINE, stdout, re.M), stdout
    assert figures["ratio_median"] > 0 and figures["loader_samples_per_sec"] > 0
    assert figures["settings"]["processes"] == processes
    assert figures["settings"]["train_samples"] == train_samples


def test_benchmark_compares_plain_and_lightning(tmp_path):
    stdout = run_module("benchmark", *SHORT, CPU, f"--json={tmp_path / 'figures.json'}", cwd=tmp_path).stdout
    check_report(stdout, json.loads((tmp_path / "figures.json").read_text()), processes=1)


def test_benchmark_trains_both_ways_in_a_true_precision(tmp_path):
    """bf16-true: the model and its inputs in bfloat16, both ways (the plain loop refused it)."""
    args = (*SHORT, "trainer.precision=bf16-true", CPU, f"--json={tmp_path / 'figures.json'}")
    stdout = run_module("benchmark", *args, cwd=tmp_path).stdout
    check_report(stdout, json.loads((tmp_path / "figures.json").read_text()), processes=1)


def test_benchmark_reads_mnist_sample_by_sample_with_workers(tmp_path):
    root = write_small_mnist(tmp_path / "mnist", train=300)
    mnist = ["data=mnist", f"data.root={root}", "data.download=false", "data.val_size=44", "data.in_memory=false"]
    args = [*SHORT[:3], "logger=csv", *mnist, "data.batch_size=16", "data.num_workers=1", CPU]
    stdout = run_module("benchmark", *args, f"--json={tmp_path / 'figures.json'}", cwd=tmp_path).stdout
    check_report(stdout, json.loads((tmp_path / "figures.json").read_text()), processes=1, train_samples=256)
    assert re.search(LOADER_LINE, stdout, re.M).group(1) == "1"


def test_benchmark_warns_of_nothing_it_switched_off(tmp_path):
    """Its Lightning way does not validate: the checkpoint that follows val/loss is left out, not
    warned about at each epoch's end (16 batches an epoch here, 21 steps)."""
    args = ["--steps=20", "--warmup=1", "--repeats=1", "--ways=lightning", *SHORT[3:], CPU]
    assert "could not find the monitored key" not in run_module("benchmark", *args, cwd=tmp_path).stderr


def test_benchmark_compiles_the_plain_loops_whole_step(tmp_path):
    """--ways plain-step: the plain loop with its whole step compiled (forward, loss, backward,
    optimizer), against the plain loop that compiles its model and against Lightning's path.
    Each run compiles afresh: torch never recompiles what an earlier run compiled (on an H100
    the Lightning way after plain-step ran at 2 steps/s among plain-step's CUDA graphs)."""
    args = ["--compile=default", "--ways=plain,plain-step,lightning", *SHORT, CPU, f"--json={tmp_path / 'f.json'}"]
    result = run_module("benchmark", *args, cwd=tmp_path, TORCH_LOGS="recompiles")
    stdout = result.stdout
    assert "Recompiling" not in result.stderr, result.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    check_report(stdout, figures, processes=1)
    assert re.search(rf"^plain-step +{NUMBER} ", stdout, re.M), stdout
    for pair in ("lightning/plain", "lightning/plain-step", "plain-step/plain"):
        assert re.search(rf"^ratio {pair}: {NUMBER}+ \(median of 2 paired repeats", stdout, re.M), stdout
        assert figures["ratio_medians"][pair] > 0
    assert figures["settings"]["compile"] == "default"


@pytest.mark.parametrize(
    ("ways", "message"),
    [
        (["--ways=plain,plian"], "--ways plain,plian: each of plain, plain-step, lightning at most once"),
        (["--ways=plain,plain"], "--ways plain,plain: each of plain, plain-step, lightning at most once"),
        (["--ways=plain-step,lightning"], "--ways plain-step compiles the plain loop's whole step: give --compile"),
    ],
)
def test_benchmark_refuses_ways_it_cannot_run(ways, message, capsys):
    from mnist_ddp.benchmark.__main__ import main

    with pytest.raises(SystemExit) as stopped:
        main(ways)  # before anything runs
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_benchmark_with_two_processes(tmp_path):
    args = ["--processes=2", *SHORT, CPU, f"--json={tmp_path / 'figures.json'}"]
    stdout = run_module("benchmark", *args, cwd=tmp_path).stdout
    check_report(stdout, json.loads((tmp_path / "figures.json").read_text()), processes=2)


@pytest.mark.slow
def test_scaling_prints_the_table(tmp_path):
    args = ["--processes=1,2", "--repeats=1", *SHORT[:2], *SHORT[3:], CPU]
    stdout = run_module("benchmark.scaling", *args, cwd=tmp_path).stdout
    assert "| processes | samples/s | time per epoch (s) | speed-up | efficiency |" in stdout
    assert re.search(r"^\| 1 \| \d+ \| [\d.]+ \| 1\.00 \| 100% \|$", stdout, re.M), stdout
    assert re.search(r"^\| 2 \| \d+ \| [\d.]+ \| [\d.]+ \| \d+% \|$", stdout, re.M), stdout


def test_epoch_end_command_prints_the_gap_between_epochs(tmp_path):
    args = ["--epochs=3", "--batches=2", "--count-calls", "data.batch_size=16", "logger=csv", CPU]
    stdout = run_module("benchmark.epoch_end", *args, cwd=tmp_path).stdout
    line = rf"^epoch ends: 1 after the first, median {NUMBER}+ ms, \d+ Python calls \(timed while counting\); "
    assert re.search(line + r"batch 16, 2 batches an epoch, on cpu; torch ", stdout, re.M), stdout


def test_overhead_command_prints_microseconds_per_step(tmp_path):
    args = ["--steps=3", "--warmup=1", "--repeats=1", "--batch-size=16", "logger=csv", CPU]
    stdout = run_module("benchmark.overhead", *args, f"--json={tmp_path / 'overhead.json'}", cwd=tmp_path).stdout
    ways = ("plain", "bare", "project", "data", "added bare-plain", "added project-bare", "added project-bare-data")
    for way in ways:
        assert re.search(rf"^{way} +-?{NUMBER} +-?{NUMBER}$", stdout, re.M), stdout
    figures = json.loads((tmp_path / "overhead.json").read_text())
    assert set(figures["us_per_step"]) == {"plain", "bare", "project", "data"}
    assert all(way["wall"] > 0 for way in figures["us_per_step"].values())


def test_overhead_counts_python_calls_per_step(tmp_path):
    args = ["--steps=3", "--warmup=1", "--repeats=1", "--batch-size=16", "--count-calls", "logger=csv", CPU]
    stdout = run_module("benchmark.overhead", *args, f"--json={tmp_path / 'calls.json'}", cwd=tmp_path).stdout
    calls = json.loads((tmp_path / "calls.json").read_text())["python_calls_per_step"]
    assert 0 < calls["plain"] < min(calls["bare"], calls["project"]), calls  # Lightning's loop is Python
    assert re.search(rf"^added project-bare-data +-?{NUMBER}$", stdout, re.M), stdout


def test_overhead_counts_torch_operators_per_step(tmp_path):
    args = ["--steps=3", "--warmup=1", "--repeats=1", "--batch-size=16", "--count-ops", "logger=csv", CPU]
    stdout = run_module("benchmark.overhead", *args, f"--json={tmp_path / 'ops.json'}", cwd=tmp_path).stdout
    ops = json.loads((tmp_path / "ops.json").read_text())["torch_ops_per_step"]
    # A step of one Linear layer: forward, loss, backward, AdamW; the data: index, normalise.
    assert 20 < ops["plain"] <= ops["bare"] < 100 and 0 < ops["data"] < 20, ops
    assert re.search(r"^way +torch ops/step$", stdout, re.M), stdout


PROFILE_ROW = r"^ +-?\d+\.\d +-?\d+\.\d  \S"  # µs/step, calls/step, function


def profiles(directory) -> dict[str, str]:
    return {path.name: path.read_text() for path in directory.iterdir()}


def test_benchmark_profiles_where_each_way_spends_its_time(tmp_path):
    """--profile: one more run of each way under cProfile; the timed figures are printed as before."""
    args = [*SHORT[:2], "--repeats=1", *SHORT[3:], CPU, f"--profile={tmp_path / 'profile'}"]
    stdout = run_module("benchmark", *args, cwd=tmp_path).stdout
    assert re.search(r"^ratio lightning/plain: ", stdout, re.M), stdout
    written = profiles(tmp_path / "profile")
    assert set(written) == {"plain.txt", "lightning.txt", "lightning-plain.txt"}
    assert re.search(PROFILE_ROW, written["lightning.txt"], re.M), written["lightning.txt"]
    assert "lightning - plain: " in written["lightning-plain.txt"]
    assert "pytorch_lightning/" in written["lightning-plain.txt"]  # Lightning's loop: what plain lacks


def test_overhead_profiles_where_each_way_spends_its_time(tmp_path):
    args = ["--steps=3", "--warmup=1", "--repeats=1", "--batch-size=16", "logger=csv", CPU]
    run_module("benchmark.overhead", *args, f"--profile={tmp_path / 'profile'}", cwd=tmp_path)
    written = profiles(tmp_path / "profile")
    ways = {"plain.txt", "bare.txt", "project.txt", "data.txt"}
    assert set(written) == ways | {"bare-plain.txt", "project-bare.txt", "project-plain.txt"}
    for name in ways:
        assert re.search(PROFILE_ROW, written[name], re.M), written[name]
    assert "pytorch_lightning/" in written["bare-plain.txt"]


OUTPUTS = [  # an option, the path it is given (under tmp_path), the line's reason and fix
    ("--profile", "notes", "is a file, not a folder. Fix: --profile a folder of yours, e.g. --profile profile/"),
    ("--json", "results", "is a folder, not a file. Fix: --json a file of yours, e.g. --json figures.json"),
    ("--json", "notes/figures.json", "cannot be made: {tmp}/notes is a file. Fix: --json a file of yours"),
]


@pytest.mark.parametrize("module", ["benchmark.__main__", "benchmark.overhead"])
@pytest.mark.parametrize(("option", "path", "reason"), OUTPUTS, ids=["profile-file", "json-folder", "json-under-file"])
def test_an_output_path_that_cannot_be_written_stops_with_one_line(module, option, path, reason, capsys, tmp_path):
    """Before anything trains: the figures or profiles would otherwise be lost after the whole run."""
    import importlib

    (tmp_path / "notes").write_text("mine")
    (tmp_path / "results").mkdir()
    main = importlib.import_module(f"{{ cookiecutter.package_name }}.{module}").main
    with pytest.raises(SystemExit) as stopped:
        main(["--steps=1", "--warmup=1", "--repeats=1", f"{option}={tmp_path / path}", CPU])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ERROR: {option} {tmp_path / path} {reason.format(tmp=tmp_path)}"), line
    assert (tmp_path / "notes").read_text() == "mine"


def test_benchmark_refuses_more_processes_than_gpus(monkeypatch, capsys):
    import torch

    from {{ cookiecutter.package_name }}.benchmark.__main__ import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(SystemExit) as stopped:
        main(["--processes=2"])  # before torchrun starts any process
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ERROR: --processes 2: each process needs its own GPU and 1 are visible here.")
    assert "Fix: --processes 1 or fewer, or trainer.accelerator=cpu" in line


def test_benchmark_refuses_a_size_variable_that_is_not_a_number(monkeypatch, capsys):
    from {{ cookiecutter.package_name }}.benchmark.__main__ import main

    monkeypatch.setenv("WORLD_SIZE", "two")  # read with int() before the check: a traceback
    with pytest.raises(SystemExit) as stopped:
        main(ONE_STEP)
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ERROR: WORLD_SIZE='two' in the environment: "), line


def test_benchmark_refuses_no_processes(capsys):
    from {{ cookiecutter.package_name }}.benchmark.__main__ import main

    with pytest.raises(SystemExit) as stopped:
        main(["--processes=0"])  # before: ran one process, as if --processes 1
    assert stopped.value.code == 2
    assert "argument --processes: '0': a whole number >= 1" in capsys.readouterr().err  # the option named, alone


# module, its arguments, a part of the one line it must print (exit 2, before any way trains)
ONE_STEP = ["--steps=1", "--warmup=1", "--repeats=1"]
BAD_OVERRIDES = [
    ("benchmark.__main__", [*ONE_STEP, "data.batch_size=abc"], "ERROR: data.batch_size=abc: an integer >= 1"),
    ("benchmark.__main__", [*ONE_STEP, "--processes=2", "model=resnet"], "ERROR: model=resnet: no such choice of"),
    ("benchmark.__main__", [*ONE_STEP, "trainer.sync_batchnorm=true", CPU], "ERROR: trainer.sync_batchnorm=true works"),
    (
        "benchmark.__main__",
        [*ONE_STEP, "trainer.precision=transformer-engine", CPU],
        "ERROR: trainer.precision=transformer-engine: the benchmark's plain loop trains 32-true, bf16-mixed",
    ),
    ("benchmark.overhead", [*ONE_STEP, "logger=null"], "ERROR: logger=null: logger is a config group"),
    ("benchmark.overhead", [*ONE_STEP, "foo=1"], "ERROR: foo=1: no such key in the config"),
    ("benchmark.scaling", [*ONE_STEP, "--processes=1,2", "trainer.precision=17"], "ERROR: trainer.precision=17: one"),
    ("benchmark.epoch_end", ["--epochs=3", "data.batch_sise=16"], "ERROR: data.batch_sise=16: no such key"),
    # a count below 1: the line named every option ("--warmup, --steps, --repeats and ... must be at least 1")
    ("benchmark.overhead", [*ONE_STEP, "--batch-size=-1"], "ERROR: argument --batch-size: '-1': a whole number >= 1"),
    ("benchmark.scaling", ["--steps=0"], "ERROR: argument --steps: '0': a whole number >= 1. Fix: 1 or more"),
    # What the benchmarks themselves cannot run (before: the plain loop waited forever for a batch;
    # tracebacks from every rank; a refusal after the plain way, or the first count, had trained)
    (
        "benchmark.__main__",
        [*ONE_STEP, "data.num_samples=8", "data.batch_size=16", CPU],
        "ERROR: data.batch_size=16: more than the 8 training samples",
    ),
    (
        "benchmark.__main__",
        [*ONE_STEP, "trainer.devices=2", CPU],
        "ERROR: trainer.devices=2 x trainer.num_nodes=1: the",
    ),
    (
        "benchmark.__main__",
        [*ONE_STEP, "--compile=default", "strategy=fsdp2", CPU],
        "ERROR: --compile default cannot be used with strategy=fsdp2",
    ),
    (
        "benchmark.scaling",
        [*ONE_STEP, "--processes=1,2", "data.num_samples=24", "data.batch_size=16", CPU],
        "ERROR: data.batch_size=16: more than the 12 training samples that each of the 2 process(es) gets (24 in "
        "all), so nothing would train. Fix: data.batch_size=12 or less, fewer processes (--processes), or more data",
    ),
    ("benchmark.overhead", [*ONE_STEP, "data=mnist"], "ERROR: data=mnist: benchmark.overhead trains on synthetic"),
    ("benchmark.overhead", [*ONE_STEP, "data.batch_size=4"], "ERROR: data.batch_size=4: benchmark.overhead sets it"),
    ("benchmark.epoch_end", ["--epochs=3", "data=mnist"], "ERROR: data=mnist: benchmark.epoch_end trains on synthetic"),
    # What the plain loop does not do: a ratio of unlike loops; a resume met the benchmark's own max_steps
    ("benchmark.__main__", [*ONE_STEP, "trainer.accumulate_grad_batches=4", CPU], "ERROR: trainer.accumulate_gra"),
    ("benchmark.__main__", [*ONE_STEP, "trainer.gradient_clip_val=1", CPU], "ERROR: trainer.gradient_clip_val=1: the"),
    ("benchmark.__main__", [*ONE_STEP, "ckpt_path=last", CPU], "ERROR: ckpt_path=last: the benchmark's plain loop has"),
    # the Lightning way alone compiled (a minute), and the report said "compiled: no"
    ("benchmark.__main__", [*ONE_STEP, "speed.compile=default", CPU], "ERROR: speed.compile=default: the benchmark"),
    # More data than memory (before: torch's allocation error, a traceback)
    ("benchmark.__main__", [*ONE_STEP, "data.num_samples=10000000000", CPU], "ERROR: data.num_samples=10000000000: "),
    ("benchmark.overhead", ["--steps=1000000000", CPU], "ERROR: --warmup + --steps = 1000000050 batches of 128: about"),
    ("benchmark.epoch_end", ["--batches=1000000000", CPU], "ERROR: --batches 1000000000 of 128: about"),
]


BAD_OVERRIDE_IDS = [" ".join(arg for arg in args if arg not in ONE_STEP) for _, args, _ in BAD_OVERRIDES]


@pytest.mark.parametrize(("module", "args", "message"), BAD_OVERRIDES, ids=BAD_OVERRIDE_IDS)
def test_benchmarks_stop_a_wrong_override_with_one_line(module, args, message, monkeypatch, capsys, tmp_path):
    """The benchmarks take train.py's overrides and check them as train.py does: one line, exit 2."""
    import importlib

    monkeypatch.chdir(tmp_path)  # output_root=outputs is checked where it would be made
    for name in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "HYDRA_FULL_ERROR"):
        monkeypatch.delenv(name, raising=False)
    main = importlib.import_module(f"{{ cookiecutter.package_name }}.{module}").main
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(message) and "Fix: " in line, line
    assert not list(tmp_path.iterdir()), "a refused benchmark made files"


def test_the_plain_loop_takes_the_configs_speed_settings():
    """It set TF32 and cudnn's benchmark mode whatever speed.* said, and the Lightning way took speed.*:
    with speed.matmul_precision=highest the two ways were unlike."""
    import torch
    from omegaconf import OmegaConf

    from {{ cookiecutter.package_name }}.benchmark.plain import tuned_backends

    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark
    speed = OmegaConf.create({"matmul_precision": "medium", "cudnn_benchmark": False})
    with tuned_backends(torch.device("cuda"), speed):  # the settings only: nothing runs on the GPU
        assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark) == ("medium", False)
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark) == before
