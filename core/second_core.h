#pragma once

// Work that splits in two (the heads of an attention block) runs on two cores: one half on a
// helper thread that lives for the process, the other on the caller's thread. LibTorch runs
// one intra-op thread on a 2-core machine (more measured slower: its small element-wise ops
// pay more in hand-over than they gain), and OpenBLAS spends the second core on the matrix
// products only, so the softmax, masks and diagnostics ran on one core.

#include <cstdint>
#include <functional>

namespace relulens::core {

// Whether a second core is there to take half the work (at least two hardware threads).
bool secondCoreAvailable();
// Whether the machine has exactly two hardware threads.
bool twoCoresExactly();

// Runs `first` on the helper thread and `second` here, returning when both are done; the
// helper runs with the caller's autograd mode. When the helper is busy with another caller's
// work, or there is no second core, both run here, first then second. An exception from
// either is rethrown here (the first one's when both throw), after both have finished.
void runOnTwoCores(const std::function<void()>& first, const std::function<void()>& second);

// Calls f(first row, row count) for the two halves of `rows` rows, one half on each core by
// runOnTwoCores; f(0, rows) alone where there is no second core or too few rows to pay for
// the hand-over. f must write only its own rows.
void inRowHalves(int64_t rows, const std::function<void(int64_t, int64_t)>& f);

// Lowers the calling thread's scheduling priority (nice 10), so that a thread that paints gets
// a core first when both are busy with a long pass. The helper thread of runOnTwoCores takes the
// priority of the thread whose work it runs (as far as it may: a thread can lower its priority
// but not raise it back). Linux only; elsewhere it does nothing.
void lowerThreadPriority();

// While one lives, OpenBLAS multiplies on the calling thread only (each of the two halves
// takes one core instead of both halves asking OpenBLAS for both). Restores OpenBLAS's thread
// count when destroyed. Does nothing when the BLAS in use is not OpenBLAS.
class SingleThreadedBlas {
public:
    SingleThreadedBlas();
    ~SingleThreadedBlas();
    SingleThreadedBlas(const SingleThreadedBlas&) = delete;
    SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

private:
    int previous_ = 0;
};

}  // namespace relulens::core
