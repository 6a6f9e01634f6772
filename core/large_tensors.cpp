#include "core/large_tensors.h"

#include <malloc.h>
#include <sys/mman.h>

#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <deque>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/torch_include.h"

namespace relulens::core {

namespace {

constexpr size_t kPage = size_t(2) << 20;  // a transparent huge page
// Freed mappings kept for the next tensors of their size (a forward pass makes the same shapes
// layer after layer): the pages are then neither faulted nor zeroed again.
constexpr size_t kKeptFreeBytes = size_t(128) << 20;

size_t roundedUp(size_t n) {
    return (n + kPage - 1) / kPage * kPage;
}

struct Mapping {
    void* base = nullptr;
    size_t length = 0;  // of the whole mapping
    void* data = nullptr;
};

// Every mapping given out, and the freed ones kept for reuse (oldest first).
class Mappings {
public:
    static Mappings& instance() {
        static auto* m = new Mappings();  // never destroyed: static tensors outlive statics
        return *m;
    }

    void* take(size_t n) {
        const size_t length = roundedUp(n) + kPage;
        std::unique_lock<std::mutex> lock(mutex_);
        for (auto it = freed_.rbegin(); it != freed_.rend(); ++it) {
            if (it->length != length) continue;
            const Mapping m = *it;
            freed_.erase(std::next(it).base());
            freedBytes_ -= m.length;
            live_[m.data] = m;
            return m.data;
        }
        lock.unlock();
        Mapping m;
        m.base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        TORCH_CHECK(m.base != MAP_FAILED, "out of memory: ", n, " bytes could not be mapped");
        m.length = length;
        // A 2 MB-aligned start, so that every page of the tensor can be a huge one.
        m.data = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(m.base) + kPage - 1) / kPage *
                                         kPage);
        madvise(m.data, roundedUp(n), MADV_HUGEPAGE);
        lock.lock();
        live_[m.data] = m;
        return m.data;
    }

    // False when `data` is not one of ours.
    bool give(void* data) {
        std::vector<Mapping> unmap;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = live_.find(data);
            if (it == live_.end()) return false;
            freed_.push_back(it->second);
            freedBytes_ += it->second.length;
            live_.erase(it);
            while (freedBytes_ > kKeptFreeBytes) {
                unmap.push_back(freed_.front());
                freedBytes_ -= freed_.front().length;
                freed_.pop_front();
            }
        }
        for (const auto& m : unmap) munmap(m.base, m.length);
        return true;
    }

private:
    std::mutex mutex_;
    std::unordered_map<void*, Mapping> live_;
    std::deque<Mapping> freed_;
    size_t freedBytes_ = 0;
};

class LargeTensorAllocator final : public c10::Allocator {
public:
    explicit LargeTensorAllocator(c10::Allocator* small) : small_(small) {}

    c10::DataPtr allocate(size_t n) const override {
        if (n < kLargeTensorBytes) return small_->allocate(n);
        void* data = Mappings::instance().take(n);
        return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
    }

    c10::DeleterFnPtr raw_deleter() const override { return &release; }

    // What the allocator before this one frees with (raw_allocate's small blocks).
    static c10::DeleterFnPtr smallDeleter;

private:
    static void release(void* data) {
        if (data && !Mappings::instance().give(data) && smallDeleter) smallDeleter(data);
    }

    c10::Allocator* small_;
};

c10::DeleterFnPtr LargeTensorAllocator::smallDeleter = nullptr;

bool transparentHugePages() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(f, modes);
    // "always [madvise] never": the bracketed mode is the one in force
    return modes.find("[always]") != std::string::npos ||
           modes.find("[madvise]") != std::string::npos;
}

}  // namespace

bool mapLargeTensorsApart() {
    static const bool installed = [] {
        if (!transparentHugePages()) return false;
        c10::Allocator* previous = c10::GetCPUAllocator();
        LargeTensorAllocator::smallDeleter = previous->raw_deleter();
        static LargeTensorAllocator allocator(previous);
        c10::SetCPUAllocator(&allocator);
        // The C heap keeps the smaller tensors' memory between passes. Left alone, glibc maps
        // each block from 128 KB up apart and gives the heap's free top back above 128 KB:
        // both only rise once it has freed a mapping of its own, which the tensors above no
        // longer give it, so every pass faulted its mid-size tensors in anew (about 5,500
        // faults per 1,024-token forward, half its time).
        mallopt(M_MMAP_THRESHOLD, int(kLargeTensorBytes));
        mallopt(M_TRIM_THRESHOLD, int(kKeptHeapTopBytes));
        return true;
    }();
    return installed;
}

}  // namespace relulens::core
