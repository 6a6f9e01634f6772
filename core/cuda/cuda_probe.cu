#include "core/cuda/cuda_probe.h"

#include <cuda_runtime.h>

namespace relulens::core {

namespace {

// A trivial kernel proves the device code path runs where a GPU exists.
__global__ void addOne(int* value) {
    *value += 1;
}

}  // namespace

std::string cudaRuntimeReport() {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    std::string report = "CUDA runtime " + std::to_string(runtime / 1000) + "." +
                         std::to_string((runtime % 1000) / 10) + ", " + std::to_string(devices) +
                         " GPU(s) visible";
    if (devices > 0) {
        int* value = nullptr;
        int host = 41;
        if (cudaMalloc(&value, sizeof(int)) == cudaSuccess) {
            cudaMemcpy(value, &host, sizeof(int), cudaMemcpyHostToDevice);
            addOne<<<1, 1>>>(value);
            cudaMemcpy(&host, value, sizeof(int), cudaMemcpyDeviceToHost);
            cudaFree(value);
            report += host == 42 ? ", kernel check passed" : ", kernel check FAILED";
        }
    }
    return report;
}

}  // namespace relulens::core
