#!/usr/bin/env bash
# The test command: set up .venv, then test the template (bakes projects and runs their tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# shellcheck disable=SC1091
source "${VENV:-.venv}/bin/activate"
python -m pytest tests "$@"
