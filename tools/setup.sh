#!/usr/bin/env bash
# Create (or update) the venv ($VENV, default .venv) from tools/requirements.txt: what baking a
# project and its default run need. Idempotent. DeepSpeed and Horovod are not in it: the
# runs and tests that use them set them up with tools/setup-deepspeed-horovod.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
source "$VENV/bin/activate"
# Already satisfied (a second run): pip only checks, in seconds.
pip install --quiet -r tools/requirements.txt

echo "setup: $(python -c 'import torch, pytorch_lightning as pl; print(f"torch {torch.__version__}, lightning {pl.__version__}")') in $VENV"
