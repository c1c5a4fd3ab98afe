#!/usr/bin/env bash
# Build Horovod 0.28.1 (its last release) from source against the torch installed in the
# active Python environment, and install it. Idempotent: does nothing when Horovod already
# imports and was built against this very torch version.
#
# Why a script: PyPI has no Horovod wheels, and 0.28.1's sdist hard-codes C++14, which
# current torch headers reject (torch >= 2.14 needs C++20, older 2.x C++17). We patch that.
#
#   bash scripts/install-horovod.sh                  # CPU (gloo) always; CUDA/NCCL, MPI (mpicxx) if found
#   HOROVOD_CPU_ONLY=1 bash scripts/install-horovod.sh   # skip GPU support even if CUDA is present
#   HOROVOD_REBUILD=1 bash scripts/install-horovod.sh    # build again, e.g. after loading other modules
#   HOROVOD_BUILD_CUDA_CC_LIST=90 bash scripts/install-horovod.sh  # CUDA kernels for H100s only (faster build)
#   PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR bash scripts/install-horovod.sh  # offline: sdist, cffi, pycparser in DIR
#
# On a cluster: load the CUDA (and MPI) modules first, then run this in your venv.
# Build prerequisites: cmake >= 3.13 and a C++20 compiler (g++ >= 10). Takes ~5 minutes.
set -euo pipefail

HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
PYTHON=${PYTHON:-python}
WHEEL_CACHE=${HOROVOD_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horovod-wheels}

torch_version=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)
# MPI (besides gloo) whenever an MPI compiler is here to build against, e.g. Open MPI.
with_mpi=$(command -v mpicxx >/dev/null && command -v mpirun >/dev/null && echo 1 || echo 0)

# CUDA whenever torch is a CUDA build and a CUDA toolkit is here, unless HOROVOD_CPU_ONLY=1.
cuda_dir=""
if [[ ${HOROVOD_CPU_ONLY:-0} != 1 ]]; then
  cuda_home=$("$PYTHON" -c 'import torch
from torch.utils.cpp_extension import CUDA_HOME
print(CUDA_HOME if torch.version.cuda and CUDA_HOME else "")' 2>/dev/null | tail -n 1)
  if [[ -n $cuda_home ]]; then
    # torch reports /usr/local when nvcc is a wrapper in /usr/local/bin: take the first
    # candidate that really is a toolkit, since cmake needs its headers and cudart.
    for dir in "${CUDA_HOME:-}" "${CUDA_PATH:-}" "$cuda_home" /usr/local/cuda; do
      [[ -n $dir && -e $dir/include/cuda_runtime.h ]] && { cuda_dir=$dir; break; }
    done
    [[ -n $cuda_dir ]] || { echo "install-horovod: no CUDA toolkit found; set CUDA_HOME or HOROVOD_CPU_ONLY=1" >&2; exit 1; }
  fi
fi
flavour=$([[ -n $cuda_dir ]] && echo cuda || echo cpu)
# A build for some GPUs only runs on those: its cached wheel is kept apart.
built_for=$flavour
if [[ $flavour == cuda && -n ${HOROVOD_BUILD_CUDA_CC_LIST:-} ]]; then
  built_for=cuda-cc${HOROVOD_BUILD_CUDA_CC_LIST//,/-}
fi

built_as_wanted() {
  # Horovod records the framework versions it was built against in horovod/metadata.json;
  # a build without MPI (or CUDA) is redone once MPI (or a CUDA toolkit) is here.
  WANT_MPI=$with_mpi WANT_CUDA=$([[ $flavour == cuda ]] && echo 1 || echo 0) "$PYTHON" - <<'PY' 2>/dev/null
import json, os, pathlib, horovod, horovod.torch as hvd, torch
meta = json.loads((pathlib.Path(horovod.__file__).parent / "metadata.json").read_text())
raise SystemExit(
    meta.get("pytorch") != torch.__version__
    or hvd.mpi_built() != (os.environ["WANT_MPI"] == "1")
    or hvd.cuda_built() != (os.environ["WANT_CUDA"] == "1")
)
PY
}

check_build() {
  "$("$PYTHON" -c 'import sys, os; print(os.path.dirname(sys.executable))')/horovodrun" --check-build
}

rebuild=${HOROVOD_REBUILD:-0}
if [[ $rebuild != 1 ]] && built_as_wanted; then
  echo "install-horovod: horovod already built for torch $torch_version ($flavour$([[ $with_mpi == 1 ]] && echo ', MPI'))"
  check_build
  exit 0
fi

# A wheel built earlier for the same torch, Python, CPU or CUDA, and MPI choice is reused: the build takes minutes.
cache_dir="$WHEEL_CACHE/torch-$torch_version-$built_for-$([[ $with_mpi == 1 ]] && echo gloo-mpi || echo gloo)"
py_tag=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
wheel=$(find "$cache_dir" -maxdepth 1 -name "horovod-$HOROVOD_VERSION-$py_tag-*.whl" 2>/dev/null | head -n 1 || true)
if [[ -n $wheel && $rebuild != 1 ]]; then
  echo "install-horovod: installing cached $wheel"
  "$PYTHON" -m pip install --quiet --no-deps --force-reinstall "$wheel"
  "$PYTHON" -m pip install --quiet cloudpickle psutil pyyaml packaging cffi
  check_build
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v cmake >/dev/null || "$PYTHON" -m pip install --quiet cmake
"$PYTHON" -m pip install --quiet cffi cloudpickle psutil pyyaml packaging wheel setuptools
"$PYTHON" -m pip download --quiet --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$work"
tar -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work"
src="$work/horovod-$HOROVOD_VERSION"

# The C++ standard torch's extension builder uses is the one its headers need.
cxx_std=$("$PYTHON" -c 'import inspect, torch.utils.cpp_extension as c; print(20 if "c++20" in inspect.getsource(c) else 17)')
sed -i "s/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD $cxx_std)/" "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
# Newer tools than 0.28.1 knew: g++ >= 13 no longer pulls <string> in through <vector>, which
# one header relied on; CMake >= 4 refuses its bundled gloo's minimum version (2.8) without
# this CMake variable (read from the environment).
sed -i 's/^#include <vector>$/#include <string>\n#include <vector>/' "$src/horovod/common/group_table.h"
export CMAKE_POLICY_VERSION_MINIMUM=${CMAKE_POLICY_VERSION_MINIMUM:-3.5}

export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1
if [[ $with_mpi == 1 ]]; then
  export HOROVOD_WITH_MPI=1
else
  export HOROVOD_WITHOUT_MPI=1
fi

if [[ $flavour == cpu ]]; then
  # CPU-only: treat torch as a CPU build, so that Horovod neither adds CUDA nor links cudart.
  sed -i 's/(torch.version.cuda is not None) and (CUDA_HOME is not None)/False/' "$src/cmake/Modules/FindPytorch.cmake"
  echo "install-horovod: CPU-only build (gloo$([[ $with_mpi == 1 ]] && echo ', MPI'))"
else
  export CUDA_HOME=$cuda_dir CUDAToolkit_ROOT=$cuda_dir HOROVOD_CUDA_HOME=$cuda_dir
  # NCCL: a cluster module (HOROVOD_NCCL_HOME) or the one pip installed beside torch.
  nccl_home=${HOROVOD_NCCL_HOME:-$("$PYTHON" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)}
  if [[ -n $nccl_home && -e $nccl_home/include/nccl.h ]]; then
    if [[ ! -e $nccl_home/lib/libnccl.so && -e $nccl_home/lib/libnccl.so.2 ]]; then
      # pip's NCCL ships only libnccl.so.2; give the linker the unversioned name.
      mkdir -p "$work/nccl/lib" && ln -s "$nccl_home/include" "$work/nccl/include"
      ln -s "$nccl_home/lib/libnccl.so.2" "$work/nccl/lib/libnccl.so"
      nccl_home="$work/nccl"
    fi
    export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_HOME=$nccl_home HOROVOD_NCCL_LINK=SHARED
  fi
  echo "install-horovod: CUDA build with $CUDA_HOME, GPU operations: ${HOROVOD_GPU_OPERATIONS:-none (MPI/gloo)}"
fi

echo "install-horovod: building horovod $HOROVOD_VERSION for torch $torch_version with C++$cxx_std (minutes)"
mkdir -p "$cache_dir"
MAKEFLAGS="-j$(nproc)" "$PYTHON" -m pip wheel --no-build-isolation --no-deps -w "$cache_dir" "$src"
"$PYTHON" -m pip install --quiet --no-deps --force-reinstall "$cache_dir"/horovod-"$HOROVOD_VERSION"-*.whl
check_build
