#!/usr/bin/env bash
# The objects compiled for AVX2 (core/*_avx2.cpp, see core/cpu_kernels.h) may define no symbol
# but their entry points. Any other external definition (an inline function or template from a
# header, emitted as a weak symbol, or a stray global) could be the copy the linker keeps for the
# whole program, and then portable code would run AVX2 instructions on a processor without them.
# usage: avx2_symbols_test.sh OBJECT...   (every object of relulens_core; others are skipped)
set -euo pipefail
allowed=("relulens::core::rowPassAvx2(" "relulens::core::fused::attendRows(")
checked=0
failed=0
for object in "$@"; do
  case "$object" in *_avx2.cpp.o | *_avx2.cpp.obj) ;; *) continue ;; esac
  checked=$((checked + 1))
  # (read here, not in a process substitution, so that a failing nm fails the test)
  symbols="$(nm -C --defined-only --extern-only "$object")"
  while read -r _ kind name; do
    [ -n "$kind" ] || continue
    ok=0
    if [[ "$kind" != [WwVvu] ]]; then
      for prefix in "${allowed[@]}"; do
        [[ "$name" == "$prefix"* ]] && ok=1
      done
    fi
    # a pointer to the C++ runtime's unwinding routine, the same in every object that has
    # unwind tables (the sanitized build's): data, not code
    [ "$name" = DW.ref.__gxx_personality_v0 ] && ok=1
    if [ "$ok" -eq 0 ]; then
      echo "FAIL: $(basename "$object") defines $kind $name"
      failed=1
    fi
  done <<<"$symbols"
done
if [ "$checked" -eq 0 ]; then
  echo "FAIL: no *_avx2.cpp.o object among the $# given"
  exit 1
fi
[ "$failed" -eq 0 ] || exit 1
echo "ok: $checked AVX2 objects define only their entry points"
