#!/usr/bin/env bash
# The GPU figures of the generated docs/gpu-results.md, for a maintainer with a GPU machine
# that has no network (issue 10's targets, every strategy on one GPU, the suite on a GPU).
#
#   bash tools/gpu-figures.sh prepare             # here, with the package index: .whl/ and .gpu/
#   bash tools/gpu-figures.sh targets [NAMES]     # there: issue 10's speed targets, summarised
#   bash tools/gpu-figures.sh strategies [NAMES]  # there: each strategy on one GPU, 3 epochs
#   bash tools/gpu-figures.sh horovod             # there: Horovod built with NCCL, then trained on one GPU
#   bash tools/gpu-figures.sh tests [ARGS]        # there: the generated suite (pytest ARGS);
#                                                 #   GPU_FIGURES_REST=1: the tests the last call left
#
# Targets: b128-eager b128-compiled b1024-bf16 b1024-bf16-compiled overhead epoch-end
# train-compiled (all seven by default), and by name only profile-b128-compiled and
# profile-overhead: where the host's time per step goes, function by function, Lightning
# against plain (the benchmarks' --profile), and b128-compiled-step: what compiling the plain
# loop's whole step buys over compiling its model (the benchmark's --ways plain-step), and
# gpu-busy: the GPU's own work per step against the wall time (tools/gpu_busy.py).
# Strategies: ddp deepspeed_stage_1 ... (strategies()). Measured on an H100 (2026-11-25): all seven targets 400 s in two calls;
# `tests` more than 480 s; `horovod`'s build 2 - 4 minutes on 16 cores. 2026-11-26: the
# machine's start about 35 s; `tests -m cuda tests` 44 s with the set-up; train-compiled 31 s,
# b128-compiled 29 s, profile-b128-compiled 28 s, gpu-busy 44 s. A session's device time is
# 15 minutes, the machine's start included: one full call and a short one. What issue 10
# still lacks, in that order: the whole suite (518 tests: more than one call; the second call,
# on the same warm machine, runs the tests the first did not get to), then Horovod on a GPU
# and the rerun of the whole-step comparison (stopped on 2026-11-26, since fixed):
#   GPU_FIGURES_LIMIT=560 bash tools/gpu-figures.sh tests
#   GPU_FIGURES_REST=1 GPU_FIGURES_LIMIT=250 bash tools/gpu-figures.sh tests
#   GPU_FIGURES_LIMIT=270 bash tools/gpu-figures.sh horovod
#   GPU_FIGURES_LIMIT=200 bash tools/gpu-figures.sh targets b128-compiled-step
# then `strategies` in a later lease. Each command's time is printed: plan the next call by
# it. The logs add up in $LOGS only within one machine's lease.
# "There" is the checkout's copy on the GPU machine, with .whl/ and .gpu/ sent along (both
# ignored by git). Logs and JSON go to $LOGS (default /tmp/gpu-figures), the summary is
# printed, and where $OUT is set (the device tool's folder that comes back) the summary and a
# tarball of the logs are copied there. Torch, Lightning and pytest come from that machine's
# Python; the rest from .whl/, installed into $HOME/site without the network.
# Each command gets what is left of GPU_FIGURES_LIMIT seconds (default 560, inside a device
# call's 600) from the script's start, so that what ran still comes back when one is stopped.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${LOGS:-/tmp/gpu-figures}
RUNS=/tmp/gpu-figures-runs  # a directory per training run below it (checkpoints): not sent back
mkdir -p "$LOGS"
PYTHON=${PYTHON:-python3}
LIMIT=${GPU_FIGURES_LIMIT:-560}
if [[ ! $LIMIT =~ ^[0-9]+$ ]] || ((LIMIT < 60)); then
  echo "gpu-figures: GPU_FIGURES_LIMIT=$LIMIT: whole seconds, at least 60 (default 560, under a device call's 600). Fix: unset it or e.g. GPU_FIGURES_LIMIT=560" >&2
  exit 2
fi

prepare() {
  set -e
  local py=${GPU_PYTHON_VERSION:-3.12}  # that machine's Python
  rm -rf .whl .gpu
  pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl \
    hydra-core==1.3.8 omegaconf==2.3.0 hjson pydantic pydantic-core annotated-types typing-inspection typing-extensions \
    submitit==1.5.4 hydra-submitit-launcher==1.2.0 cffi pycparser
  pip download -q --no-deps --no-binary=:all: -d .whl deepspeed==0.19.8 antlr4-python3-runtime==4.9.3 horovod==0.28.1
  cookiecutter . --no-input --output-dir .gpu
  echo "prepared .whl/ ($(du -sh .whl | cut -f1)) and $(ls -d .gpu/*); send both (carry) and run there:"
  echo "  bash tools/gpu-figures.sh targets"
}

setup() {  # on the GPU machine: about 25 s
  local site=$HOME/site
  # Once per machine: the next call on the same warm machine keeps its device time.
  local carried
  carried=$(find .whl -type f -printf '%f %s\n' | sort)
  if [[ $carried != "$(cat "$site/.installed-from" 2>/dev/null)" ]]; then
    $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || exit 1
    $PYTHON -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target "$site" \
      .whl/antlr4-python3-runtime-*.tar.gz || exit 1
    DS_BUILD_OPS=0 $PYTHON -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target "$site" \
      .whl/deepspeed-*.tar.gz >/dev/null 2>&1 || echo "gpu-figures: DeepSpeed did not install; its rows will fail"
    echo "$carried" >"$site/.installed-from"
  fi
  TEMPLATE=$PWD
  local projects=("$PWD"/.gpu/*/) packages
  PROJECT=${projects[0]}
  packages=("$PROJECT"src/*/)
  PACKAGE=$(basename "${packages[0]}")
  export PYTHONPATH=$site:${PROJECT}src PYTHONUNBUFFERED=1
  cd "$PROJECT" || exit 1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/machine.txt"
  $PYTHON -c "import sys, torch, pytorch_lightning as pl; print('python', sys.version.split()[0], 'torch', torch.__version__, 'lightning', pl.__version__)" | tee -a "$LOGS/machine.txt"
}

# run NAME COMMAND...: the command's output in $LOGS/NAME.log; its exit code and time printed.
# It is stopped when the script's time is up (exit 124), leaving 20 s to summarise and send back.
run() {
  local name=$1 start=$SECONDS left=$((LIMIT - SECONDS - 20))
  shift
  if ((left < 10)); then
    echo "== $name: not run, the script's $LIMIT s are up" && return 0
  fi
  echo "== $name: $*"
  timeout -k 5 "$left" "$@" >"$LOGS/$name.log" 2>&1
  local code=$?
  echo "   exit $code in $((SECONDS - start)) s$( ((code == 124)) && echo ' (stopped: time up)')"
  return 0
}

# One command per target (their names are the logs' names); all of them by default.
target() {
  local bench=(-m "$PACKAGE.benchmark") b1024=(data.batch_size=1024 trainer.precision=bf16-mixed)
  case $1 in
    b128-eager) run "$1" "$PYTHON" "${bench[@]}" --steps 300 --repeats 3 --json "$LOGS/$1.json" ;;
    b128-compiled) run "$1" "$PYTHON" "${bench[@]}" --compile reduce-overhead --warmup 20 --steps 300 --repeats 3 \
      --json "$LOGS/$1.json" ;;
    b1024-bf16) run "$1" "$PYTHON" "${bench[@]}" --steps 200 --repeats 3 "${b1024[@]}" --json "$LOGS/$1.json" ;;
    b1024-bf16-compiled) run "$1" "$PYTHON" "${bench[@]}" --compile reduce-overhead --warmup 20 --steps 200 \
      --repeats 3 "${b1024[@]}" --json "$LOGS/$1.json" ;;
    overhead) run "$1" "$PYTHON" -m "$PACKAGE.benchmark.overhead" --json "$LOGS/$1.json" ;;
    epoch-end) run "$1" "$PYTHON" -m "$PACKAGE.benchmark.epoch_end" "${b1024[@]}" ;;
    train-compiled) run "$1" "$PYTHON" train.py data=synthetic data.num_samples=60000 speed.compile=reduce-overhead \
      trainer.max_epochs=3 "output_root=$RUNS" ;;
    # Not targets. What compiling the plain loop's whole step (forward, loss, backward, optimizer) buys
    # over compiling its model, as Lightning's path does:
    b128-compiled-step) run "$1" "$PYTHON" "${bench[@]}" --compile reduce-overhead --ways plain,plain-step,lightning \
      --warmup 20 --steps 300 --repeats 3 --json "$LOGS/$1.json" ;;
    # How long the GPU itself works per step, against the wall time per step (a hand loop).
    gpu-busy) run "$1" "$PYTHON" "$TEMPLATE/tools/gpu_busy.py" "$PACKAGE" ;;
    # Where the host's time per step goes, function by function (benchmark/profile.py).
    profile-b128-compiled) run "$1" "$PYTHON" "${bench[@]}" --compile reduce-overhead --warmup 20 --steps 300 \
      --repeats 1 --profile "$LOGS/$1" ;;
    profile-overhead) run "$1" "$PYTHON" -m "$PACKAGE.benchmark.overhead" --warmup 30 --steps 300 --repeats 1 \
      --profile "$LOGS/$1" ;;
    *) echo "gpu-figures: no target $1" && return 1 ;;
  esac
}

targets() {
  local name all=(b128-eager b128-compiled b1024-bf16 b1024-bf16-compiled overhead epoch-end train-compiled)
  for name in "${@:-${all[@]}}"; do
    target "$name" || return 1
  done
  summary
}

strategies() {
  local strategy all=(ddp deepspeed_stage_1 deepspeed_stage_2 deepspeed_stage_3 deepspeed_json fsdp fsdp2
    deepspeed_stage_3_offload)
  for strategy in "${@:-${all[@]}}"; do
    run "strategy-$strategy" "$PYTHON" train.py data=synthetic data.num_samples=60000 "strategy=$strategy" \
      trainer.max_epochs=3 "output_root=$RUNS"
  done
  summary
}

horovod() {
  # The project's own build script, offline: pip takes the sdist and cffi from .whl/ (pip's
  # PIP_NO_INDEX and PIP_FIND_LINKS); CUDA kernels for this GPU only (Horovod's own variable).
  local cc
  cc=$($PYTHON -c 'import torch; print("%d%d" % torch.cuda.get_device_capability())' 2>/dev/null) &&
    export HOROVOD_BUILD_CUDA_CC_LIST=${HOROVOD_BUILD_CUDA_CC_LIST:-$cc}
  PIP_NO_INDEX=1 PIP_FIND_LINKS=$TEMPLATE/.whl PYTHON=$PYTHON run horovod-build bash scripts/install-horovod.sh
  tail -n 20 "$LOGS/horovod-build.log"
  local bin
  bin=$($PYTHON -c 'import os, sys; print(os.path.dirname(sys.executable))')
  run strategy-horovod "$bin/horovodrun" -np 1 "$PYTHON" train.py data=synthetic data.num_samples=60000 \
    strategy=horovod trainer.max_epochs=3 "output_root=$RUNS"
  summary
}

tests() {
  # Debian's apt-get would try the network for Slurm: the tests that need it skip instead.
  mkdir -p "$LOGS/bin" && printf '#!/bin/sh\nexit 1\n' >"$LOGS/bin/apt-get" && chmod +x "$LOGS/bin/apt-get"
  # Every result as it comes, failures with their report (tools/record_results.py); with
  # GPU_FIGURES_REST=1, on the same machine, only the tests the last call did not get to.
  [[ ${GPU_FIGURES_REST:-} == 1 ]] || rm -f "$LOGS/test-results.txt" "$LOGS/test-failures.txt"
  local workers=${WORKERS-14}  # WORKERS= (empty): one process, without pytest-xdist
  PATH=$LOGS/bin:$PATH PYTHONPATH=$PYTHONPATH:$TEMPLATE/tools GPU_FIGURES_LOGS=$LOGS run tests "$PYTHON" -m pytest \
    ${workers:+-n "$workers"} -rfEs --durations=20 -p no:benchmark -p record_results "${@:-tests}"
  tail -n 60 "$LOGS/tests.log"
  grep -v '^passed' "$LOGS/test-results.txt" 2>/dev/null
  summary
}

# The figures against issue 10's targets, and one line per training run.
summary() {
  $PYTHON - "$LOGS" <<'EOF'
import json, os, re, sys
from pathlib import Path

out = Path(sys.argv[1])

def bench(name):
    path = out / f"{name}.json"
    if not path.exists():
        return None
    figures = json.loads(path.read_text())
    return figures["ways"]["plain"]["median"], figures["ways"]["lightning"]["median"], figures["ratio_median"]

def last_epoch(name):
    path = out / f"{name}.log"
    found = re.findall(r"Throughput of the last epoch: (\d+) samples/s", path.read_text()) if path.exists() else []
    return float(found[-1]) if found else None

rows = []
for name, what, target in (
    ("b128-eager", "batch 128 eager: Lightning / plain", None),
    ("b128-compiled", "batch 128 compiled: Lightning / plain compiled", 0.9),
    ("b1024-bf16", "batch 1024 bf16: Lightning / tuned plain", 0.98),
):
    got = bench(name)
    if got:
        met = "" if target is None else ("met" if got[2] >= target else "not met")
        rows.append(f"{what}: plain {got[0]:,.0f}, Lightning {got[1]:,.0f} samples/s, ratio {got[2]:.3f} {met}")
path = out / "b128-compiled-step.json"
if path.exists():
    figures = json.loads(path.read_text())
    ways, ratios = {name: way["median"] for name, way in figures["ways"].items()}, figures["ratio_medians"]
    rows.append(
        f"batch 128, the plain loop's whole step compiled: {ways['plain-step']:,.0f} samples/s, "
        f"{ratios['plain-step/plain']:.3f} of the plain loop compiling its model ({ways['plain']:,.0f}); "
        f"Lightning {ways['lightning']:,.0f}: {ratios['lightning/plain-step']:.3f} of it"
    )
got = bench("b1024-bf16-compiled")
if got:
    met = "met" if got[1] >= 250_000 else "not met"
    rows.append(f"batch 1024 bf16 compiled: Lightning {got[1]:,.0f} samples/s (>= 250,000 {met}; plain {got[0]:,.0f})")
if (out / "overhead.json").exists():
    overhead = json.loads((out / "overhead.json").read_text())
    added = {name: value["wall"] for name, value in overhead["added_us_per_step"].items()}
    ways = {name: value["wall"] for name, value in overhead["us_per_step"].items()}
    met = "met" if added["project-bare"] < 100 else "not met"
    rows.append(
        f"project over bare Lightning: {added['project-bare']:.0f} us/step (< 100 {met}; of it data "
        f"{added['project-bare'] - added['project-bare-data']:.0f}); bare over plain {added['bare-plain']:.0f}; "
        + ", ".join(f"{name} {value:.0f}" for name, value in ways.items())
    )
busy = out / "gpu-busy.log"
if busy.exists():  # the GPU's own work per step of a hand loop, against its wall time
    rows += [f"gpu-busy: {line}" for line in busy.read_text().splitlines() if line.startswith("batch ")]
epoch_end = out / "epoch-end.log"
found = re.findall(r"^epoch ends: .*", epoch_end.read_text(), re.M) if epoch_end.exists() else []
if found:
    rows.append(f"between epochs, batch 1024 bf16: {found[-1]}")
build = out / "horovod-build.log"
if build.exists():
    _, listed, operations = build.read_text().rpartition("Available Tensor Operations")
    found = {name: mark == "X" for mark, name in re.findall(r"\[([X ])\] (\w+)", operations)} if listed else {}
    made = ", ".join(f"{name} {'yes' if found.get(name) else 'no'}" for name in ("NCCL", "MPI", "Gloo"))
    first_error = next((line.strip() for line in operations.splitlines() if re.search(r": error:|CMake Error", line)), "")
    failed = f"horovod build: failed (horovod-build.log){': ' + first_error if first_error else ''}"
    rows.append(f"horovod build's tensor operations: {made}" if found else failed)
for log in sorted(out.glob("*.log")):
    samples = last_epoch(log.stem)
    if samples and (log.stem.startswith("train") or log.stem.startswith("strategy")):
        epoch = 60000 / samples
        note = f" (epoch <= 1 s {'met' if epoch <= 1 else 'not met'})" if log.stem == "train-compiled" else ""
        rows.append(f"{log.stem}: last epoch {samples:,.0f} samples/s, {epoch:.2f} s an epoch{note}")
tests, results = out / "tests.log", out / "test-results.txt"
found = re.findall(r"^=+ (.*\d+ (?:passed|failed).*) =+$", tests.read_text(), re.M) if tests.exists() else []
outcomes = [line.split(" ", 2) for line in results.read_text().splitlines()] if results.exists() else []
counts = ", ".join(f"{sum(1 for o, _, _ in outcomes if o == k)} {k}" for k in ("failed", "passed", "skipped"))
if found:
    rows.append(f"the generated suite: {found[-1]}")
elif outcomes:  # stopped before its end
    rows.append(f"the generated suite, stopped before its end: {counts}")
if found and outcomes and os.environ.get("GPU_FIGURES_REST") == "1":  # this call's and the earlier ones'
    rows.append(f"the generated suite, all calls: {counts}")
rows += [f"  failed: {test}" for outcome, _, test in outcomes if outcome == "failed"]
for compared in sorted(out.glob("profile-*/*-*.txt")):  # where one way spends more host time than another
    _heading, difference, _caveat, _columns, *table = compared.read_text().splitlines()
    rows.append(f"{compared.parent.name}: {difference} (us/step, calls/step)")
    rows += [f"  {line.strip()}" for line in table[:8]]
print("\n".join(rows) or "no figures yet")
(out / "summary.txt").write_text("\n".join(rows) + "\n")
EOF
}

# Where the device tool collects files (at most 8): the summary and one tarball of the logs.
send_back() {
  if [[ -n ${OUT:-} ]]; then
    cp "$LOGS/summary.txt" "$LOGS/test-failures.txt" "$OUT/" 2>/dev/null
    tar czf "$OUT/$1.tar.gz" -C "$LOGS" . && echo "logs: $OUT/$1.tar.gz"
  fi
}

case ${1:-} in
  prepare) prepare ;;
  targets | strategies | horovod | tests) group=$1 && shift && setup && "$group" "$@" && send_back "$group" ;;
  summary) summary ;;
  *) sed -n '2,/^set /{/^set /!p}' "$0" && exit 2 ;;
esac
