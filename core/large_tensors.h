// Memory for large tensors on the CPU: their own mappings, in 2 MB pages where the system
// offers transparent huge pages, given back to the system when the tensor is freed.
//
// The window keeps a few captures of a long text (hundreds of MB each) and makes and drops
// others as the person types and toggles. From the C heap, a dropped capture's memory stays
// with the process in pieces too small for the next one (at 8,192 tokens the heap held up to
// 1 GB free while 1.0–1.4 GB was in use), and every fresh 4 KB page costs a fault. Mapped
// apart, the process holds what it uses, and a 2 MB page is one fault instead of 512.
#pragma once
#include <cstddef>

namespace relulens::core {

// Tensors of at least this many bytes get a mapping of their own.
constexpr size_t kLargeTensorBytes = size_t(2) << 20;
// Free memory at the top of a C heap kept for the next pass rather than given back (smaller
// tensors come from the C heap).
constexpr size_t kKeptHeapTopBytes = size_t(16) << 20;

// Makes LibTorch's CPU tensors of kLargeTensorBytes or more come from their own mappings
// (smaller ones from the allocator LibTorch had, with the C heap set to keep their memory:
// blocks below kLargeTensorBytes from the heap, kKeptHeapTopBytes of free top kept). Call once,
// before tensors are made on other threads. Returns false, and changes nothing, where the system
// has no transparent huge pages (there a mapping per tensor would cost a fault per 4 KB page every
// time).
bool mapLargeTensorsApart();

}  // namespace relulens::core
