// The engine's hand-vectorised kernels: core/row_pass_avx2.cpp (the diagnostics' row pass) and
// core/fused_attention_avx2.cpp (attention in tiles) are compiled for AVX2 and FMA on x86-64
// with GCC or Clang (core/CMakeLists.txt defines RELULENS_AVX2_KERNELS then), and called only on
// a processor that has both; the package still runs on one that has neither.
#pragma once

namespace relulens::core {

// Whether this build has the AVX2 kernels and this processor runs them.
bool avx2KernelsRun();

}  // namespace relulens::core
