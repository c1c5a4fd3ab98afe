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
# pip runs only when the requirements or this recipe changed since its last success: even a
# check that finds everything installed takes a minute on a busy 2-core machine.
stamp=$VENV/.requirements.sha256
wanted=$(cat tools/requirements.txt tools/setup.sh | sha256sum | cut -d' ' -f1)
if [[ $(cat "$stamp" 2>/dev/null) != "$wanted" ]]; then
  # uv unpacks torch's 5 GB in parallel (54 s where pip takes 2 min 36 s on 2 cores), from
  # the same indexes as pip (its configuration passed on). Bytecode is compiled once here:
  # where PYTHONDONTWRITEBYTECODE is set, nothing else writes it, and every process (each rank
  # of every test job) would compile torch and Lightning again, 15 s of CPU each.
  pip install --quiet uv==0.13.9
  mapfile -t index_flags < <(python tools/pip_index_flags.py)
  uv pip install --quiet --compile-bytecode --python "$VENV/bin/python" --index-strategy unsafe-best-match \
    "${index_flags[@]}" -r tools/requirements.txt
  echo "$wanted" >"$stamp"
fi

echo "setup: $(python -c 'import importlib.metadata as m; print(", ".join(f"{p} {m.version(p)}" for p in ("torch", "pytorch-lightning")))') in $VENV"
