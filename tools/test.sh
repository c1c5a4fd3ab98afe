#!/usr/bin/env bash
# The test command: the template's own tests, then the default bake's own suite, run directly so
# that its summary (counts, skip reasons, slowest tests) shows. Extra arguments go to both runs.
# Exits non-zero when either run fails or runs no test (pytest's exit 5).
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

template=0
python -m pytest tests "$@" || template=$?

# The generated suite trains with DeepSpeed and Horovod: set them up first (cached after once).
bash tools/setup-deepspeed-horovod.sh
rm -rf build/test
cookiecutter . --no-input --output-dir build/test
generated=0
(cd build/test/mnist-ddp && python -m pytest -ra --durations=15 "$@") || generated=$?
echo "test: template tests exit $template, generated project's tests exit $generated"
exit $((template ? template : generated))
