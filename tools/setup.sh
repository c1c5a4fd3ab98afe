#!/usr/bin/env bash
# Create (or update) .venv with everything the tests and a baked project need. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

# The tests run shellcheck on the rendered sbatch scripts; Debian has it (root only).
if ! command -v shellcheck >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null) ||
        echo "setup: could not install shellcheck; the tests that need it will be skipped" >&2
fi

[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
source "$VENV/bin/activate"
pip install --quiet --upgrade pip
pip install --quiet -r tools/requirements.txt
echo "setup: $(python -c 'import torch, pytorch_lightning as pl; print(f"torch {torch.__version__}, lightning {pl.__version__}")') in $VENV"
