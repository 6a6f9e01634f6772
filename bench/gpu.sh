#!/usr/bin/env bash
# Runs `relulens bench` on a GPU machine: builds the Qt-free core and the command line against the
# LibTorch inside that machine's Python torch package (the one with CUDA), then benchmarks on
# CUDA. Extra arguments go to `relulens bench` (e.g. --sizes 128 512 2048 8192 16384).
#
#   bench/gpu.sh                     # build in build-gpu/, bench, write build-gpu/bench-gpu.json
#   PYTHON=python3.11 bench/gpu.sh   # another interpreter's torch
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RELULENS_GPU_BUILD:-$ROOT/build-gpu}"
PYTHON="${PYTHON:-python3}"

say() { echo "bench/gpu.sh: $*" >&2; }

if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  say "$PYTHON cannot import torch; set PYTHON to an interpreter whose torch has CUDA"
  exit 1
fi
read -r TORCH_VERSION TORCH_PREFIX CUDA_OK < <("$PYTHON" -c \
  'import torch; print(torch.__version__, torch.utils.cmake_prefix_path, torch.cuda.is_available())')
say "torch $TORCH_VERSION at $TORCH_PREFIX, CUDA available: $CUDA_OK"
if [ "$CUDA_OK" != "True" ]; then
  say "this torch sees no CUDA device; the benchmark would run on the CPU (run scripts/run's build for that)"
  exit 1
fi

# What the core needs besides torch: a compiler, CMake, SentencePiece and nlohmann-json.
missing=()
for tool in cmake g++ pkg-config; do command -v "$tool" >/dev/null || missing+=("$tool"); done
pkg-config --exists sentencepiece 2>/dev/null || missing+=(libsentencepiece-dev)
[ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ]; then
    say "installing ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "missing: ${missing[*]} (install them, then run again)"
    exit 1
  fi
fi

# The torch CMake package looks for the CUDA toolkit it was built with; point it at nvcc if found.
extra=()
for nvcc in "${CUDACXX:-}" "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc; do
  if [ -n "$nvcc" ] && [ -x "$nvcc" ]; then
    extra+=("-DCMAKE_CUDA_COMPILER=$nvcc" "-DCUDAToolkit_ROOT=$(dirname "$(dirname "$nvcc")")")
    break
  fi
done

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DRELULENS_BUILD_GUI=OFF -DRELULENS_BUILD_TESTS=OFF "${extra[@]}" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target relulens
"$BUILD/bin/relulens" --version
"$BUILD/bin/relulens" bench --device cuda --no-gui --model "$ROOT/resources/models/softmax" \
  --file "$ROOT/resources/sample.txt" --json "$BUILD/bench-gpu.json" "$@"
say "figures written to $BUILD/bench-gpu.json"
