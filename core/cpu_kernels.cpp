#include "core/cpu_kernels.h"

namespace relulens::core {

bool avx2KernelsRun() {
#if defined(RELULENS_AVX2_KERNELS)
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
#else
    return false;
#endif
}

}  // namespace relulens::core
