// Built only when nvcc is found: reports the CUDA runtime the build was compiled against and the
// devices the driver sees, independently of whether LibTorch itself has CUDA.
#pragma once
#include <string>

namespace relulens::core {

std::string cudaRuntimeReport();

}  // namespace relulens::core
