#include "core/second_core.h"

#include <dlfcn.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cerrno>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include <c10/core/GradMode.h>

namespace relulens::core {

namespace {

#ifdef __linux__
// On Linux each thread has its own nice value, set through its thread id.
int threadNice() {
    errno = 0;
    const int nice = getpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)));
    return errno == 0 ? nice : 0;
}
void setThreadNice(int nice) {
    setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), nice);
}
#else
int threadNice() {
    return 0;
}
void setThreadNice(int) {}
#endif

// The helper thread: waits for one task at a time. Tasks are taken only through try_lock of
// `claim`, so a second caller never queues behind the first (it runs its halves itself).
class Helper {
public:
    Helper() : thread_([this] { loop(); }) {}
    ~Helper() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }

    std::mutex claim;

    // Starts `task` on the helper (the caller holds `claim`).
    void start(const std::function<void()>* task, bool gradEnabled, int nice) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            task_ = task;
            gradEnabled_ = gradEnabled;
            nice_ = nice;
            done_ = false;
            error_ = nullptr;
        }
        wake_.notify_all();
    }

    // Waits for the started task; returns its exception, if any.
    std::exception_ptr wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        finished_.wait(lock, [this] { return done_; });
        return error_;
    }

private:
    void loop() {
        ownNice_ = threadNice();  // a new thread has its creator's
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return stop_ || task_ != nullptr; });
            if (stop_) return;
            const auto* task = task_;
            const bool grad = gradEnabled_;
            const int nice = nice_;
            lock.unlock();
            if (nice != ownNice_) {
                setThreadNice(nice);
                ownNice_ = threadNice();
            }
            std::exception_ptr error;
            try {
                c10::AutoGradMode mode(grad);
                (*task)();
            } catch (...) {
                error = std::current_exception();
            }
            lock.lock();
            task_ = nullptr;
            error_ = error;
            done_ = true;
            finished_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_, finished_;
    const std::function<void()>* task_ = nullptr;
    bool gradEnabled_ = false, done_ = false, stop_ = false;
    int nice_ = 0, ownNice_ = 0;  // the caller's nice value; the helper's own
    std::exception_ptr error_;
    std::thread thread_;  // last: starts after the members it reads
};

Helper& helper() {
    static Helper instance;
    return instance;
}

using SetThreads = void (*)(int);
using GetThreads = int (*)();

struct OpenBlas {
    SetThreads set = nullptr;
    GetThreads get = nullptr;
};

const OpenBlas& openBlas() {
    // LibTorch reaches BLAS through libblas.so.3, which is OpenBLAS where libopenblas0 is
    // installed (the reference BLAS has neither function).
    static const OpenBlas functions = [] {
        OpenBlas f;
        f.set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
        f.get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
        if (!f.set || !f.get) f = OpenBlas{};
        return f;
    }();
    return functions;
}

unsigned hardwareThreads() {
    static const unsigned threads = std::thread::hardware_concurrency();
    return threads;
}

}  // namespace

bool secondCoreAvailable() {
    return hardwareThreads() >= 2;
}

bool twoCoresExactly() {
    return hardwareThreads() == 2;
}

void runOnTwoCores(const std::function<void()>& first, const std::function<void()>& second) {
    std::unique_lock<std::mutex> claimed;
    if (secondCoreAvailable())
        claimed = std::unique_lock<std::mutex>(helper().claim, std::try_to_lock);
    if (!claimed.owns_lock()) {
        first();
        second();
        return;
    }
    helper().start(&first, c10::GradMode::is_enabled(), threadNice());
    std::exception_ptr mine;
    try {
        second();
    } catch (...) {
        mine = std::current_exception();
    }
    const std::exception_ptr theirs = helper().wait();
    if (theirs) std::rethrow_exception(theirs);
    if (mine) std::rethrow_exception(mine);
}

void inRowHalves(int64_t rows, const std::function<void(int64_t, int64_t)>& f) {
    // A hand-over to the helper measured about 26 µs on a 2-core machine: some three rows of a
    // default model's layer (~0.9 MFLOP a row), so a half of 16 rows gains several times what
    // it costs. (Not tuned further: 16 lets the 37-token reference text split.)
    constexpr int64_t kMinRowsPerHalf = 16;
    if (rows < 2 * kMinRowsPerHalf || !secondCoreAvailable()) {
        f(0, rows);
        return;
    }
    const int64_t half = rows / 2;
    runOnTwoCores([&] { f(0, half); }, [&] { f(half, rows - half); });
}

void lowerThreadPriority() {
    constexpr int kBackground = 10;
    if (threadNice() < kBackground) setThreadNice(kBackground);
}

SingleThreadedBlas::SingleThreadedBlas() {
    const auto& blas = openBlas();
    if (!blas.set) return;
    previous_ = blas.get();
    if (previous_ > 1) blas.set(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
    if (previous_ > 1) openBlas().set(previous_);
}

}  // namespace relulens::core
