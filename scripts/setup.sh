# Sourced by scripts/run, scripts/test and scripts/package: installs missing Debian packages
# (quietly, only when something is missing), then configures and builds ReluLens in a persistent
# build folder.
set -euo pipefail

RELULENS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RELULENS_BUILD="${RELULENS_BUILD:-$RELULENS_ROOT/build}"
RELULENS_PACKAGES=(cmake g++ make pkg-config
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6
  libtorch-dev libsentencepiece-dev sentencepiece libopenblas0 nlohmann-json3-dev libpng-dev
  xvfb xauth python3-numpy libpcre2-dev libicu-dev
  dpkg-dev file desktop-file-utils appstream)

# What scripts/test needs beyond the app: the formatter it checks the sources with, and doctest,
# the header-only framework of the core's tests (they build and run without Qt).
RELULENS_TEST_PACKAGES=(clang-format doctest-dev)

# relulens_install_packages [extra packages...]: RELULENS_PACKAGES and the extra ones.
relulens_install_packages() {
  local missing=()
  for package in "${RELULENS_PACKAGES[@]}" "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$package")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "ReluLens: installing ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Every C++ and CUDA source the repository tracks is as clang-format (with the repository's
# .clang-format) writes it; the files that are not are named, with the command that fixes them.
relulens_check_format() {
  local unformatted=()
  local file
  while IFS= read -r file; do
    if ! clang-format --dry-run --Werror "$RELULENS_ROOT/$file" >/dev/null 2>&1; then
      unformatted+=("$file")
    fi
  done < <(git -C "$RELULENS_ROOT" ls-files '*.cpp' '*.h' '*.cu')
  if [ ${#unformatted[@]} -gt 0 ]; then
    echo "ReluLens: ${#unformatted[@]} source file(s) are not formatted: ${unformatted[*]}" >&2
    echo "ReluLens: run  clang-format -i ${unformatted[*]}" >&2
    return 1
  fi
}

# The npm packages the tokenizer tests compare against (pinned in tests/package-lock.json),
# installed into the build folder when the lock file changed. Node and npm come with this
# machine kind; Debian's nodejs and npm are installed only when they are missing.
relulens_install_npm() {
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  local target="$RELULENS_BUILD/npm"
  mkdir -p "$target"
  if ! cmp -s "$RELULENS_ROOT/tests/package-lock.json" "$target/package-lock.json" ||
     [ ! -d "$target/node_modules/@lenml/tokenizers" ]; then
    cp "$RELULENS_ROOT/tests/package.json" "$RELULENS_ROOT/tests/package-lock.json" "$target/"
    (cd "$target" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}

# relulens_libtorch_options DIR: the CMake options that build against the LibTorch in DIR
# instead of Debian's (CPU-only) one, printed one per line; or a message and status 1 when DIR
# holds no LibTorch, or one the window cannot link with. DIR is the unpacked official archive
# (the folder named libtorch) or a PyTorch's `python3 -c "import torch;
# print(torch.utils.cmake_prefix_path)"`.
relulens_libtorch_options() {
  local dir="$1" config=""
  for candidate in "$dir/share/cmake/Torch" "$dir/Torch" "$dir"; do
    if [ -f "$candidate/TorchConfig.cmake" ]; then config="$candidate"; break; fi
  done
  if [ -z "$config" ]; then
    echo "RELULENS_LIBTORCH=$dir: no TorchConfig.cmake in $dir/share/cmake/Torch, $dir/Torch or $dir" >&2
    return 1
  fi
  # Debian's Qt and SentencePiece use the C++11 string ABI; a LibTorch built with the old one
  # cannot be linked with them.
  if grep -q "_GLIBCXX_USE_CXX11_ABI=0" "$config/TorchConfig.cmake"; then
    echo "RELULENS_LIBTORCH=$dir: this LibTorch uses the pre-C++11 string ABI (_GLIBCXX_USE_CXX11_ABI=0)," >&2
    echo "  which Debian's Qt cannot link with; use a cxx11-ABI build (see the README, \"Using an NVIDIA GPU\")" >&2
    return 1
  fi
  echo "-DTorch_DIR=$config"
  # A CUDA LibTorch's CMake files look for the CUDA toolkit; point them at nvcc when it is here.
  local nvcc
  for nvcc in "${CUDACXX:-}" "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc; do
    if [ -n "$nvcc" ] && [ -x "$nvcc" ]; then
      echo "-DCMAKE_CUDA_COMPILER=$nvcc"
      echo "-DCUDAToolkit_ROOT=$(dirname "$(dirname "$nvcc")")"
      break
    fi
  done
}

# relulens_build [cmake options...]: configures and builds everything, or only the targets
# named in RELULENS_TARGETS (scripts/run builds just the app).
relulens_build() {
  local extra=("$@")
  local jobs
  jobs="${RELULENS_JOBS:-$(nproc 2>/dev/null || echo 2)}"
  cmake -S "$RELULENS_ROOT" -B "$RELULENS_BUILD" -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >/dev/null
  local targets=()
  for target in ${RELULENS_TARGETS:-}; do targets+=(--target "$target"); done
  cmake --build "$RELULENS_BUILD" -j "$jobs" "${targets[@]}"
}
