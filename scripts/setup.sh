# Sourced by scripts/run, scripts/test and scripts/package: installs missing Debian packages
# (quietly, only when something is missing), then configures and builds ReluLens in a persistent
# build folder.
set -euo pipefail

RELULENS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RELULENS_BUILD="${RELULENS_BUILD:-$RELULENS_ROOT/build}"
RELULENS_PACKAGES=(cmake g++ make pkg-config
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6
  libtorch-dev libsentencepiece-dev sentencepiece libopenblas0 nlohmann-json3-dev
  xvfb xauth python3-numpy libpcre2-dev libicu-dev
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
