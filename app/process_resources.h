// What the process costs the machine, as the benchmark reports it: peak resident memory and
// the kernel's share (page faults, system CPU time). Linux's /proc and getrusage.
#pragma once
#include <cstdint>

namespace relulens::app {

// The process's peak resident memory so far (VmHWM), in MB; 0 where /proc has none.
double peakResidentMb();

// Starts the peak above anew from the memory resident now (Linux's clear_refs); false where
// the kernel does not allow it, and the peak stays the process's.
bool resetPeakResident();

// What the process has cost the kernel so far: minor page faults (first touches of memory,
// slow on some virtual machines when large tensors are allocated anew) and system CPU time
// (the faults, and thread waits and the like).
struct KernelCost {
    int64_t minorFaults = 0;
    double systemMs = 0;
};
KernelCost kernelCost();

}  // namespace relulens::app
