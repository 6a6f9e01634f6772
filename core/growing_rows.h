// A tensor of a text's rows kept with room for more, so that a capture of the text with tokens
// typed at its end writes only the new rows, in place.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

#include "core/torch_include.h"

namespace relulens::core {

// Rows of room kept after `rows` rows for the words typed next.
int64_t roomAfter(int64_t rows);

// Rows along one dimension of a tensor. Copies share the storage, each seeing its own first
// rows; the rows past the furthest any of them was given are free. One extension at a time can
// take them (the worker's next capture); any other extension, or one that keeps fewer rows than
// were given (a piece of the last word changed), copies into a new storage with room to spare.
// So rows a result or memory can see are never written again.
class GrowingRows {
public:
    GrowingRows() = default;
    // `whole`'s rows along `dim`, without room for more.
    GrowingRows(torch::Tensor whole, int64_t dim);
    // Rows of these sizes (their number at `dim`), yet to be written (tensor() is uninitialised),
    // with room for `spare` more after them.
    static GrowingRows allocated(torch::IntArrayRef sizes, int64_t dim, int64_t spare,
                                 const torch::TensorOptions& options);

    bool defined() const { return bool(storage_); }
    int64_t rows() const { return rows_; }
    // The first rows() rows; undefined when !defined().
    torch::Tensor tensor() const;
    // The first `keep` rows followed by `more` rows that the caller writes
    // (tensor().narrow(dim, keep, more)): in this storage when its room past `keep` is free,
    // else in a new one with room for `spare` rows more, where the first `keep` are copied.
    GrowingRows extended(int64_t keep, int64_t more, int64_t spare) const;
    // The same rows with room after them that no one has taken: this when it has room for at
    // least `least` rows, else a copy with room for `spare`.
    GrowingRows withRoom(int64_t least, int64_t spare) const;
    // Whether withRoom(least, …) would keep this storage (room for `least` rows no one took).
    bool hasRoom(int64_t least) const;
    bool sharesStorageWith(const GrowingRows& other) const {
        return storage_ && storage_ == other.storage_;
    }

private:
    GrowingRows copied(int64_t keep, int64_t more, int64_t spare) const;
    struct Storage {
        torch::Tensor data;             // room along the rows' dimension
        std::atomic<int64_t> given{0};  // rows given to some copy so far
    };
    std::shared_ptr<Storage> storage_;
    int64_t dim_ = 0, rows_ = 0;
};

}  // namespace relulens::core
