#include "core/device.h"

#include <thread>

#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>

#ifdef RELULENS_HAVE_CUDA_PROBE
#include "core/cuda/cuda_probe.h"
#endif

namespace relulens::core {

Result<torch::Device> selectDevice(const std::string& name) {
    if (name.empty() || name == "auto") {
        return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0)
                                           : torch::Device(torch::kCPU);
    }
    if (name == "cpu") return torch::Device(torch::kCPU);
    if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
        if (!torch::cuda::is_available()) {
            return Error{
                "device '" + name +
                "' requested, but this LibTorch build or machine has no CUDA; use --device cpu"};
        }
        int index = 0;
        if (name.size() > 5) {
            try {
                index = std::stoi(name.substr(5));
            } catch (...) {
                return Error{"bad device '" + name + "'"};
            }
        }
        if (index < 0 || index >= int(torch::cuda::device_count())) {
            return Error{"device '" + name + "' does not exist (" +
                         std::to_string(torch::cuda::device_count()) + " CUDA device(s))"};
        }
        return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
    }
    return Error{"unknown device '" + name + "' (expected auto, cpu, cuda or cuda:N)"};
}

std::string deviceReport() {
    std::string report =
        "LibTorch " + std::string(TORCH_VERSION) + ", CUDA in LibTorch: " +
        (torch::cuda::is_available()
             ? "yes (" + std::to_string(torch::cuda::device_count()) + " device(s))"
             : std::string("no"));
#ifdef RELULENS_HAVE_CUDA_PROBE
    report += ", " + cudaRuntimeReport();
#else
    report += ", built without nvcc";
#endif
    report += ", " + std::to_string(at::get_num_threads()) + " CPU thread(s)";
    return report;
}

std::string cudaUnavailableReason() {
    if (torch::cuda::is_available()) return {};
    try {
        // Only a LibTorch with its CUDA library can say which CUDA runtime it was built with.
        const long runtime = at::detail::getCUDAHooks().versionCUDART();
        return "this LibTorch has CUDA (runtime " + std::to_string(runtime / 1000) + "." +
               std::to_string(runtime % 1000 / 10) + ") but no GPU is visible";
    } catch (const std::exception&) {
        return "this LibTorch build has no CUDA (Debian's LibTorch is CPU-only)";
    }
}

void configureThreads() {
    const unsigned cores = std::thread::hardware_concurrency();
    // On two cores a second intra-op thread made the forward pass slower; use half the cores
    // on bigger machines.
    at::set_num_threads(cores <= 2 ? 1 : int(cores / 2));
}

}  // namespace relulens::core
