#!/usr/bin/env bash
# The Debian package: cpack builds it from this build folder, dpkg-deb unpacks it into a
# temporary root, and the installed relulens runs from there with no help from the build tree
# (no LD_LIBRARY_PATH, no RELULENS_* variables): --version finds the tokenizer module, render
# draws a bundled model, and the window with no display finds its models and sample text from
# the install prefix. The package's fields, its file list, its desktop entry and its AppStream
# metadata are checked too.
# usage: package_test.sh BUILD_DIR VERSION
set -euo pipefail

build="$(cd "$1" && pwd)"
version="$2"
arch="$(dpkg --print-architecture)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
work="$(cd "$work" && pwd -P)"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
pass() { echo "ok: $*"; }

for tool in cpack dpkg-deb dpkg-shlibdeps file readelf desktop-file-validate appstreamcli; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (scripts/setup.sh installs it)"; exit 1; }
done

# 1. Build the package into the temporary folder, leaving the build folder's own package alone.
if ! cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/out" >"$work/cpack.log" 2>&1; then
  cat "$work/cpack.log"
  echo "FAIL: cpack -G DEB"
  exit 1
fi
deb="$work/out/relulens_${version}_${arch}.deb"
[ -f "$deb" ] || { ls -l "$work/out"; echo "FAIL: no $(basename "$deb")"; exit 1; }
pass "$(basename "$deb") built, $(stat -c %s "$deb") bytes"

# 2. Control fields: shlibdeps filled in the libraries, plus OpenBLAS.
info="$(dpkg-deb -I "$deb")"
depends="$(dpkg-deb -f "$deb" Depends)"
echo "Depends: $depends"
[ "$(dpkg-deb -f "$deb" Package)" = relulens ] || fail "Package is not relulens"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version is not $version"
[ "$(dpkg-deb -f "$deb" Section)" = science ] || fail "Section is not science"
for dependency in libopenblas0 libtorch libqt6widgets6 libqcustomplot libsentencepiece libpng16-16 libc6; do
  grep -q "\b$dependency" <<<"$depends" || fail "Depends lacks $dependency"
done
grep -q "^ Description: .*transformer" <<<"$info" || fail "no Description"

# 3. The files, at their installed paths.
contents="$(dpkg-deb -c "$deb" | awk '{print $6}')"
expected=(
  ./usr/bin/relulens
  ./usr/lib/relulens/librelulens_spm.so
  ./usr/share/relulens/sample.txt
  ./usr/share/relulens/models/tokenizer.model
  ./usr/share/relulens/models/README.md
  ./usr/share/applications/io.github.relulens.ReluLens.desktop
  ./usr/share/metainfo/io.github.relulens.ReluLens.metainfo.xml
  ./usr/share/icons/hicolor/scalable/apps/io.github.relulens.ReluLens.svg
  ./usr/share/man/man1/relulens.1.gz
  ./usr/share/doc/relulens/copyright
)
# Every model the source tree bundles (each folder of resources/models with a config.json).
models=()
for config in "$(dirname "${BASH_SOURCE[0]}")"/../resources/models/*/config.json; do
  models+=("$(basename "$(dirname "$config")")")
done
[ ${#models[@]} -ge 11 ] || fail "only ${#models[@]} bundled models found in the source tree"
for model in "${models[@]}"; do
  for file in config.json model.safetensors tokenizer.model; do
    expected+=("./usr/share/relulens/models/$model/$file")
  done
done
# and every lesson (the window's File ▸ Open lesson starts there)
for lesson in "$(dirname "${BASH_SOURCE[0]}")"/../resources/lessons/*.relulens; do
  expected+=("./usr/share/relulens/lessons/$(basename "$lesson")")
done
for size in 16 32 48 64 128 256; do
  expected+=("./usr/share/icons/hicolor/${size}x${size}/apps/io.github.relulens.ReluLens.png")
done
for path in "${expected[@]}"; do
  grep -qxF "$path" <<<"$contents" || fail "the package lacks $path"
done
if grep -v -e '^\./usr/' -e '^\./$' <<<"$contents"; then fail "files outside /usr (listed above)"; fi
pass "${#expected[@]} expected paths checked"

# 4. Unpack and look for traces of the build machine.
root="$work/root"
dpkg-deb -x "$deb" "$root"
for binary in "$root/usr/bin/relulens" "$root/usr/lib/relulens/librelulens_spm.so"; do
  if grep -qF "$build" "$binary"; then fail "$binary mentions the build folder $build"; fi
  if readelf -d "$binary" | grep -E 'RPATH|RUNPATH'; then fail "$binary has an RPATH/RUNPATH"; fi
done
for size in 16 32 48 64 128 256; do
  icon="$root/usr/share/icons/hicolor/${size}x${size}/apps/io.github.relulens.ReluLens.png"
  file "$icon" | grep -q "PNG image data, $size x $size" || fail "$icon is not a ${size}×${size} PNG"
done
gzip -t "$root/usr/share/man/man1/relulens.1.gz" || fail "relulens.1.gz is not valid gzip"
grep -q "^License: GPL-3.0+" "$root/usr/share/doc/relulens/copyright" || fail "copyright does not state GPL-3.0+"
for component in "Qt 6" QCustomPlot LibTorch SentencePiece nlohmann-json "Jane Austen"; do
  grep -qF "$component" "$root/usr/share/doc/relulens/copyright" || fail "copyright does not list $component"
done
grep -qF "<project_license>GPL-3.0-or-later</project_license>" \
  "$root/usr/share/metainfo/io.github.relulens.ReluLens.metainfo.xml" || fail "metainfo lacks project_license"
manual="$(zcat "$root/usr/share/man/man1/relulens.1.gz")"
for section in '^\.TH RELULENS 1' '^\.SS inspect' '^\.SS render' '^\.SS train$' '^\.SS eval' '^\.SS bench'; do
  grep -q "$section" <<<"$manual" || fail "relulens.1 lacks $section"
done

# 5. Run the installed executable from the unpacked root, as on a machine with no build tree.
home="$work/home"
mkdir -p "$home"
run_installed() {
  env -u LD_LIBRARY_PATH -u RELULENS_RESOURCES -u RELULENS_SPM_MODULE \
    -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_DATA_HOME="$home/.local/share" "$@"
}
if version_output="$(run_installed "$root/usr/bin/relulens" --version 2>&1)"; then
  echo "$version_output"
  grep -q "^relulens $version$" <<<"$version_output" || fail "--version does not print relulens $version"
  grep -qF "tokenizer module: $root/usr/lib/relulens/librelulens_spm.so" <<<"$version_output" ||
    fail "--version does not report the installed tokenizer module"
else
  echo "$version_output"
  fail "relulens --version exited non-zero"
fi

png="$work/map.png"
if run_installed QT_QPA_PLATFORM=offscreen "$root/usr/bin/relulens" render \
    --model "$root/usr/share/relulens/models/softmax" --file "$root/usr/share/relulens/sample.txt" \
    --view attention --layer 1 --head 0 --attention relu_len --out "$png"; then
  description="$(file "$png")"
  echo "$description"
  grep -q "PNG image data, 1100 x 850" <<<"$description" || fail "render did not write a 1100×850 PNG"
  [ "$(stat -c %s "$png")" -gt 20000 ] || fail "the rendered PNG is only $(stat -c %s "$png") bytes"
else
  fail "relulens render exited non-zero"
fi

# With no display and no QT_QPA_PLATFORM, relulens renders the main views of the default model
# (found from the install prefix) and the bundled sample text to ./relulens-views.
mkdir -p "$work/views"
if (cd "$work/views" && run_installed "$root/usr/bin/relulens"); then
  for view in attention sparsity predictions; do
    [ -s "$work/views/relulens-views/$view.png" ] || fail "no $view.png from the window with no display"
  done
else
  fail "relulens with no display exited non-zero"
fi

# 6. The desktop entry and the AppStream metadata (offline: no network on build machines).
if desktop-file-validate "$root/usr/share/applications/io.github.relulens.ReluLens.desktop"; then
  pass "desktop-file-validate"
else
  fail "desktop-file-validate"
fi
if appstreamcli validate --no-net "$root/usr/share/metainfo/io.github.relulens.ReluLens.metainfo.xml"; then
  pass "appstreamcli validate --no-net"
else
  fail "appstreamcli validate --no-net"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "package checks passed"
