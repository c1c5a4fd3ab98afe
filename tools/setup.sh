#!/usr/bin/env bash
# Create (or update) .venv with everything the tests and a baked project need. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
source "$VENV/bin/activate"
pip install --quiet --upgrade pip
pip install --quiet -r tools/requirements.txt
echo "setup: $(python -c 'import torch, pytorch_lightning as pl; print(f"torch {torch.__version__}, lightning {pl.__version__}")') in $VENV"
