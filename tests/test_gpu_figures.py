"""tools/gpu-figures.sh summarises what the benchmark, its overhead and epoch-end commands and
train.py write. A GPU machine is lent rarely and briefly: the summary is checked here against
their real output (short runs on the CPU), so that it still reads them when one is."""

import os
import re
import subprocess
import sys

import pytest
from conftest import TEMPLATE

CPU = "trainer.accelerator=cpu"  # also where a GPU is: short CPU runs


def test_the_summary_reads_what_the_commands_write(default_project, tmp_path):
    package = default_project.name.replace("-", "_")
    env = {**os.environ, "PYTHONPATH": str(default_project / "src"), "OMP_NUM_THREADS": "1"}
    short = ["--steps=2", "--warmup=1", "--repeats=1"]
    data = ["data.num_samples=256", "data.batch_size=16", "logger=csv", CPU]
    bench, overhead = ["-m", f"{package}.benchmark"], ["-m", f"{package}.benchmark.overhead", "--batch-size=16"]
    commands = {  # named as the script names their output
        "b1024-bf16": [*bench, *short, f"--json={tmp_path}/b1024-bf16.json", *data],
        "b128-compiled-step": [
            *bench,
            *short,
            "--compile=default",
            "--ways=plain,plain-step,lightning",
            f"--json={tmp_path}/b128-compiled-step.json",
            *data,
        ],
        "overhead": [*overhead, *short, f"--json={tmp_path}/overhead.json", CPU],
        # (its data's size comes from --batches: data.num_samples is refused)
        "epoch-end": ["-m", f"{package}.benchmark.epoch_end", "--epochs=3", "--batches=2", *data[1:]],
        "train-compiled": ["train.py", "data=synthetic", *data, "trainer.max_epochs=1", f"output_root={tmp_path}/runs"],
        "profile-overhead": [*overhead, *short, f"--profile={tmp_path}/profile-overhead", CPU],
    }
    for name, command in commands.items():
        result = subprocess.run(
            [sys.executable, *command], cwd=default_project, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"{name}: {result.stdout}\n{result.stderr}"
        (tmp_path / f"{name}.log").write_text(result.stdout + result.stderr)

    lines = summarise(tmp_path)
    headings = [line.split(":")[0] for line in lines if not line.startswith(" ")]
    assert headings == [
        "batch 1024 bf16",
        "batch 128, the plain loop's whole step compiled",
        "project over bare Lightning",
        "between epochs, batch 1024 bf16",
        "train-compiled",
        "profile-overhead",  # bare - plain, project - bare, project - plain: where one spends more host time
        "profile-overhead",
        "profile-overhead",
    ], lines
    assert "ratio" in lines[0] and "us/step" in lines[2] and " ms" in lines[3] and "s an epoch" in lines[4]
    step = r"samples/s, \d\.\d{3} of the plain loop compiling its model \([\d,]+\); Lightning [\d,]+: \d\.\d{3} of it"
    assert re.search(step, lines[1]), lines[1]
    assert lines[5].startswith("profile-overhead: bare - plain: ") and re.match(r"  -?\d+\.\d +-?\d+\.\d  \S", lines[6])
    assert any(line.startswith("profile-overhead: project - bare: ") for line in lines)
    assert (tmp_path / "summary.txt").read_text().splitlines() == lines


# What `horovodrun --check-build` of Horovod 0.28.1 printed at the end of a CPU build here (MPI
# found): the GPU machine's summary says whether its build has NCCL, or that it failed.
CHECK_BUILD = """Horovod v0.28.1:

Available Frameworks:
    [ ] TensorFlow
    [X] PyTorch
    [ ] MXNet

Available Controllers:
    [X] MPI
    [X] Gloo

Available Tensor Operations:
    [ ] NCCL
    [ ] DDL
    [ ] CCL
    [X] MPI
    [X] Gloo
"""


def summarise(logs):
    summary = subprocess.run(
        ["bash", TEMPLATE / "tools" / "gpu-figures.sh", "summary"],
        env={**os.environ, "LOGS": str(logs), "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert summary.returncode == 0, summary.stderr
    return summary.stdout.splitlines()


def torch_sees_a_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# What tools/gpu_busy.py printed on an H100 (2026-11-26), its first lines (and since, the graphs it compiled).
GPU_BUSY = """NVIDIA H100 80GB HBM3, torch 2.11.0+cu130
batch 128 fp32, compiled: no: 48,293 samples/s; per step: wall 2,650 µs, GPU kernels 844 µs; compiled graphs 0
batch 128 fp32, compiled: model: 55,957 samples/s; per step: wall 2,287 µs, GPU kernels 852 µs; compiled graphs 1
"""


def test_the_summary_has_the_gpus_own_work_per_step(tmp_path):
    (tmp_path / "gpu-busy.log").write_text(GPU_BUSY)
    assert summarise(tmp_path) == [f"gpu-busy: {line}" for line in GPU_BUSY.splitlines()[1:]]


@pytest.mark.skipif(torch_sees_a_gpu(), reason="measures the GPU where there is one: minutes")
def test_the_gpus_work_is_not_measured_without_a_gpu():
    measured = subprocess.run(
        [sys.executable, TEMPLATE / "tools" / "gpu_busy.py", "mnist_ddp"], capture_output=True, text=True, timeout=120
    )
    assert measured.returncode == 2 and measured.stdout.count("\n") == 1, measured
    assert "torch sees none here. Fix: run it on a GPU machine" in measured.stdout


def test_the_summary_says_what_the_horovod_build_has(tmp_path):
    (tmp_path / "horovod-build.log").write_text("install-horovod: building horovod 0.28.1\n" + CHECK_BUILD)
    assert summarise(tmp_path) == ["horovod build's tensor operations: NCCL no, MPI yes, Gloo yes"]
    (tmp_path / "horovod-build.log").write_text(
        "  error: subprocess-exited-with-error\n      CMake Error at third_party/gloo/CMakeLists.txt:1\n"
    )
    assert summarise(tmp_path) == [
        "horovod build: failed (horovod-build.log): CMake Error at third_party/gloo/CMakeLists.txt:1"
    ]


def test_each_training_run_of_the_script_gets_its_own_directory():
    """Several runs share one machine's lease: with one output_dir the second would stop (a run
    directory that holds checkpoints is not overwritten); below one output_root each gets its own."""
    script = (TEMPLATE / "tools" / "gpu-figures.sh").read_text()
    trainings = re.findall(r"train\.py [^;]*?(?=;|\n\s*(?:run|summary|\}|$))", script, re.S)
    assert len(trainings) == 3, trainings  # train-compiled, strategies, horovod
    for command in trainings:
        assert '"output_root=$RUNS"' in command and "output_dir" not in command, command


def write_suite(directory, third_test: str, replace: bool = False):
    """A suite of three tests: one passes, one fails (with a reason), and the third as given."""
    directory.mkdir(parents=True, exist_ok=replace)
    (directory / "test_some.py").write_text(
        "import time\nimport pytest\n\ndef test_a():\n    pass\n\n"
        f"def test_b():\n    assert 1 == 2, 'the reason'\n\n{third_test}"
    )


def test_the_summary_has_the_suites_counts(tmp_path):
    suite = tmp_path / "suite"
    write_suite(suite, "@pytest.mark.skip(reason='needs a CUDA GPU')\ndef test_c():\n    pass\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-rfEs", "-p", "no:cacheprovider", str(suite)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    (logs / "tests.log").write_text(result.stdout + result.stderr)
    (line,) = summarise(logs)
    assert re.fullmatch(r"the generated suite: 1 failed, 1 passed, 1 skipped in [\d.]+s", line), line


def test_a_suite_stopped_by_the_time_limit_still_reports_its_results(tmp_path):
    """The device call's 10 minutes once stopped the generated suite before pytest's report: the
    failures' names and reasons were lost. The script stops it itself, in time, and every result
    and failure was written as it came (tools/record_results.py)."""
    home = tmp_path / "template"
    (home / "tools").mkdir(parents=True)
    for name in ("gpu-figures.sh", "record_results.py"):
        (home / "tools" / name).write_text((TEMPLATE / "tools" / name).read_text())
    (home / ".whl").mkdir()
    (home / ".gpu" / "project" / "src" / "package").mkdir(parents=True)
    write_suite(home / ".gpu" / "project" / "tests", "def test_c():\n    time.sleep(300)\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'a GPU, 1.0, 1 MiB'\n")
    (fake / "nvidia-smi").chmod(0o755)
    logs = tmp_path / "logs"
    env = {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "LOGS": str(logs),
        "PYTHON": sys.executable,
        "GPU_FIGURES_LIMIT": "60",
        "WORKERS": "",  # pytest-xdist may not be here
    }
    result = subprocess.run(
        ["bash", home / "tools" / "gpu-figures.sh", "tests", "-p", "no:cacheprovider", "tests"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(stopped: time up)" in result.stdout, result.stdout
    summary = (logs / "summary.txt").read_text().splitlines()
    assert summary == [
        "the generated suite, stopped before its end: 1 failed, 1 passed, 0 skipped",
        "  failed: tests/test_some.py::test_b",
    ], result.stdout
    failures = (logs / "test-failures.txt").read_text()
    assert failures.startswith("==== tests/test_some.py::test_b (call)") and "the reason" in failures

    # The next call on the same machine runs the rest: the test that was cut short, not those with a result.
    write_suite(home / ".gpu" / "project" / "tests", "def test_c():\n    pass\n", replace=True)
    rest = subprocess.run(
        ["bash", home / "tools" / "gpu-figures.sh", "tests", "-p", "no:cacheprovider", "tests"],
        env={**env, "GPU_FIGURES_REST": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rest.returncode == 0, rest.stdout + rest.stderr
    summary = (logs / "summary.txt").read_text().splitlines()
    assert re.fullmatch(r"the generated suite: 1 passed, 2 deselected in [\d.]+s", summary[0]), summary
    assert summary[1:] == [
        "the generated suite, all calls: 1 failed, 2 passed, 0 skipped",
        "  failed: tests/test_some.py::test_b",
    ], rest.stdout


def test_a_wrong_time_limit_stops_with_one_line(tmp_path):
    for wrong in ("ten", "30"):
        result = subprocess.run(
            ["bash", TEMPLATE / "tools" / "gpu-figures.sh", "summary"],
            env={**os.environ, "LOGS": str(tmp_path), "GPU_FIGURES_LIMIT": wrong},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2 and result.stdout == "", result.stdout
        assert result.stderr.splitlines() == [
            f"gpu-figures: GPU_FIGURES_LIMIT={wrong}: whole seconds, at least 60 (default 560, under a device "
            "call's 600). Fix: unset it or e.g. GPU_FIGURES_LIMIT=560"
        ]
