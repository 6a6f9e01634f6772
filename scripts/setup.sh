# Sourced by scripts/run, scripts/test and scripts/package: installs missing Debian packages
# (quietly, only when something is missing), then configures and builds ReluLens in a persistent
# build folder.
set -euo pipefail

RELULENS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RELULENS_BUILD="${RELULENS_BUILD:-$RELULENS_ROOT/build}"
RELULENS_PACKAGES=(cmake g++ make pkg-config
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6
  libtorch-dev libsentencepiece-dev sentencepiece libopenblas0 nlohmann-json3-dev
  xvfb xauth python3-numpy
  dpkg-dev file desktop-file-utils appstream)

relulens_install_packages() {
  local missing=()
  for package in "${RELULENS_PACKAGES[@]}"; do
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

relulens_build() {
  local extra=("$@")
  local jobs
  jobs="${RELULENS_JOBS:-$(nproc 2>/dev/null || echo 2)}"
  cmake -S "$RELULENS_ROOT" -B "$RELULENS_BUILD" -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >/dev/null
  cmake --build "$RELULENS_BUILD" -j "$jobs"
}
