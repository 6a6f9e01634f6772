// Choosing where the model runs: CUDA when this LibTorch build and the machine have it, else CPU.
#pragma once
#include <string>

#include "core/error.h"
#include "core/torch_include.h"

namespace relulens::core {

// name: "auto", "cpu", "cuda" or "cuda:N".
Result<torch::Device> selectDevice(const std::string& name);

// One line on the compute back-ends: LibTorch version, CUDA availability, threads.
std::string deviceReport();
// Why CUDA is not used, or empty when it can be: this LibTorch was built without CUDA (Debian's
// is CPU-only), or it has CUDA but no GPU is visible.
std::string cudaUnavailableReason();

// Keeps LibTorch at the thread count that is fastest on small machines (see PLATFORM.md).
void configureThreads();

}  // namespace relulens::core
