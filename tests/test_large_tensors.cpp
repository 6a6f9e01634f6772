// Large tensors in mappings of their own (core/large_tensors.h): huge pages where the system
// offers them, memory given back when they are freed (beyond a bounded reserve), values intact.
// The process's own counters are read from /proc, independently of the allocator.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "core/large_tensors.h"
#include "core/torch_include.h"
#include "core_test.h"

using namespace relulens::core;

namespace {

// A field of /proc/self/status or /proc/self/smaps_rollup, in kB.
int64_t procKb(const char* file, const std::string& field) {
    std::ifstream f(file);
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
    }
    return -1;
}

int64_t minorFaults() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

bool hugePagesOffered() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(f, modes);
    return modes.find("[never]") == std::string::npos && !modes.empty();
}

constexpr int64_t kMb = 1 << 20;

// Installs the allocator; true when it is in place, false (with a message) where the system
// offers no transparent huge pages and it rightly declined.
bool installedWhereOffered() {
    const bool installed = mapLargeTensorsApart();
    REQUIRE(installed == hugePagesOffered());
    if (!installed)
        MESSAGE("no transparent huge pages here: LibTorch's allocator is left as it is");
    return installed;
}

}  // namespace

TEST_CASE("smallerTensorsReuseTheHeapFromPassToPass") {
    if (!installedWhereOffered()) return;
#ifdef RELULENS_SANITIZED
    // AddressSanitizer's allocator replaces glibc's (mallopt has no effect on it) and keeps freed
    // blocks in quarantine, so freed memory does not serve the next pass by design.
    MESSAGE("sanitized build: the C heap is AddressSanitizer's, not glibc's");
    return;
#endif
    // A pass's worth of tensors below kLargeTensorBytes (768 KB each: a 1,024-token residual
    // stream; 12 MB in all, within kKeptHeapTopBytes), made, written and freed again and again.
    // Once the heap has settled (a pass or two), the memory the passes before freed serves them:
    // 16 fresh blocks of 768 KB would take 3,072 faults of 4 KB pages each time.
    const int64_t floats = 1024 * 192;
    std::vector<int64_t> faults;
    for (int pass = 0; pass < 6; ++pass) {
        const int64_t before = minorFaults();
        std::vector<torch::Tensor> pieces;
        for (int i = 0; i < 16; ++i) pieces.push_back(torch::full({floats}, float(i)));
        REQUIRE(pieces[15][floats - 1].item<float>() == 15.0f);
        faults.push_back(minorFaults() - before);
    }
    REQUIRE_MESSAGE(faults[4] + faults[5] < 200,
                    "page faults per pass: " << faults[0] << ", " << faults[1] << ", " << faults[2]
                                             << ", " << faults[3] << ", " << faults[4] << ", "
                                             << faults[5]);
}

TEST_CASE("largeTensorsLiveInHugePagesAndGoBackWhenFreed") {
    if (!installedWhereOffered()) return;
    REQUIRE(mapLargeTensorsApart());  // a second call changes nothing
    // The C heap told to keep what it frees (no blocks of their own below 64 MB, no trimming):
    // tensors from it would stay resident after they are freed. Set back when the case ends,
    // passed or not.
    struct HeapSettings {
        HeapSettings() {
            mallopt(M_MMAP_THRESHOLD, int(64 * kMb));
            mallopt(M_TRIM_THRESHOLD, int(1024 * kMb));
        }
        ~HeapSettings() {
            mallopt(M_MMAP_THRESHOLD, int(kLargeTensorBytes));
            mallopt(M_TRIM_THRESHOLD, int(kKeptHeapTopBytes));
        }
    } keepEverything;

    // Values survive: Σ 0..n-1 = n(n-1)/2 (n = 4 M floats, 16 MB), each element exact.
    const int64_t n = 4 * kMb;
    auto counted = torch::arange(n, torch::kFloat64);
    REQUIRE(counted.sum().item<double>() == double(n) * double(n - 1) / 2);
    REQUIRE(counted[n - 1].item<double>() == double(n - 1));

    // Huge pages: touching 64 MB adds at least 32 MB of them.
    const int64_t hugeBefore = procKb("/proc/self/smaps_rollup", "AnonHugePages");
    auto touched = torch::ones({16 * kMb}, torch::kFloat32);
    const int64_t hugeAfter = procKb("/proc/self/smaps_rollup", "AnonHugePages");
    REQUIRE(reinterpret_cast<uintptr_t>(touched.data_ptr()) % (2 * kMb) == 0);
    REQUIRE_MESSAGE(hugeAfter - hugeBefore >= 32 * 1024,
                    "AnonHugePages " << hugeBefore << " kB -> " << hugeAfter << " kB");
    touched = torch::Tensor();

    // A freed tensor's pages serve the next of its size: writing it takes no page faults (a
    // fresh 64 MB would take 32 faults of 2 MB pages, or 16,384 of 4 KB).
    auto first = torch::ones({16 * kMb}, torch::kFloat32);
    first = torch::Tensor();
    const int64_t faultsBefore = minorFaults();
    auto second = torch::zeros({16 * kMb}, torch::kFloat32);
    const int64_t faults = minorFaults() - faultsBefore;
    REQUIRE_MESSAGE(faults < 16, faults << " page faults");
    REQUIRE(second.sum().item<double>() == 0.0);
    second = torch::Tensor();

    // 384 MB made, written and freed: all but the kept reserve (128 MB) leaves the process.
    const int64_t rss0 = procKb("/proc/self/status", "VmRSS");
    std::vector<torch::Tensor> many;
    for (int i = 0; i < 96; ++i) many.push_back(torch::full({kMb}, float(i)));  // 4 MB each
    REQUIRE(many[95][kMb - 1].item<float>() == 95.0f);
    const int64_t rss1 = procKb("/proc/self/status", "VmRSS");
    REQUIRE_MESSAGE(rss1 - rss0 >= 350 * 1024, "VmRSS " << rss0 << " -> " << rss1 << " kB");
    many.clear();
    const int64_t rss2 = procKb("/proc/self/status", "VmRSS");
    REQUIRE_MESSAGE(rss1 - rss2 >= 200 * 1024,
                    "VmRSS " << rss0 << " -> " << rss1 << " -> " << rss2 << " kB");
}
