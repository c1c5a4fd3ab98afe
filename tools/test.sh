#!/usr/bin/env bash
# The test command: the template's own tests, then the default bake's own suite, run directly so
# that its summary (counts, skip reasons, slowest tests) shows. Extra arguments go to both.
# Exits non-zero when any run fails or runs no test (pytest's exit 5).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
bash tools/setup.sh
# shellcheck disable=SC1091
source "$VENV/bin/activate"

# The template tests shellcheck the rendered sbatch scripts; Debian has it (root only).
if ! command -v shellcheck >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null) ||
    echo "test: could not install shellcheck; the tests that need it will be skipped" >&2
fi

# The generated suite trains with DeepSpeed and Horovod: they are set up (built, on a fresh
# machine: minutes; cached after once) while the template tests run, which need neither.
setup_log=$(mktemp)
bash tools/setup-deepspeed-horovod.sh >"$setup_log" 2>&1 &
setup_run=$!
template=0
python -m pytest -n 2 tests "$@" || template=$?
setup=0
wait "$setup_run" || setup=$?
cat "$setup_log"
if ((setup)); then
  echo "test: tools/setup-deepspeed-horovod.sh failed (exit $setup), as printed above" >&2
  exit "$setup"
fi
rm -rf build/test
cookiecutter . --no-input --output-dir build/test
generated=0
cd build/test/mnist-ddp
if (($#)); then # tests chosen by the arguments: one run
  python -m pytest -ra --durations=15 "$@" || generated=$?
else
  # Two runs side by side: the tests that submit jobs to the local Slurm (-m slurm) mostly wait
  # (for Slurm, a signal, a job's slowed steps) and took half of the suite's time, the machine's
  # cores mostly idle meanwhile. Their report follows the other run's.
  slurm_log=$(mktemp)
  python -m pytest -ra --durations=15 -m slurm -p no:cacheprovider --basetemp="$(mktemp -d)" >"$slurm_log" 2>&1 &
  slurm_run=$!
  # The others on two workers (pytest-xdist): alone, one run used three quarters of a core.
  python -m pytest -n 2 -ra --durations=15 -m "not slurm" || generated=$?
  slurm=0
  wait "$slurm_run" || slurm=$?
  echo "test: the Slurm tests (pytest -m slurm), run beside the others, exit $slurm:"
  cat "$slurm_log"
  generated=$((generated ? generated : slurm))
fi
echo "test: template tests exit $template, generated project's tests exit $generated"
exit $((template ? template : generated))
