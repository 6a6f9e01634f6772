#include "app/process_resources.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace relulens::app {

double peakResidentMb() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
    }
    return 0;
}

bool resetPeakResident() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    return bool(clear);
}

KernelCost kernelCost() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return {int64_t(usage.ru_minflt),
            double(usage.ru_stime.tv_sec) * 1e3 + double(usage.ru_stime.tv_usec) / 1e3};
}

}  // namespace relulens::app
