#include "core/growing_rows.h"

#include <algorithm>

#include "core/capture.h"

namespace relulens::core {

GrowingRows::GrowingRows(torch::Tensor whole, int64_t dim) : dim_(dim) {
    if (!whole.defined()) return;
    rows_ = whole.size(dim);
    storage_ = std::make_shared<Storage>();
    storage_->data = std::move(whole);
    storage_->given = rows_;
}

GrowingRows GrowingRows::allocated(torch::IntArrayRef sizes, int64_t dim, int64_t spare,
                                   const torch::TensorOptions& options) {
    auto withRoom = sizes.vec();
    withRoom[size_t(dim)] += spare;
    GrowingRows out(torch::empty(withRoom, options), dim);
    out.rows_ = sizes[size_t(dim)];
    out.storage_->given = out.rows_;
    return out;
}

torch::Tensor GrowingRows::tensor() const {
    return storage_ ? storage_->data.narrow(dim_, 0, rows_) : torch::Tensor();
}

GrowingRows GrowingRows::extended(int64_t keep, int64_t more, int64_t spare) const {
    GrowingRows out;
    out.dim_ = dim_;
    out.rows_ = keep + more;
    int64_t free = keep;  // nothing past `keep` given yet
    if (keep <= rows_ && keep + more <= storage_->data.size(dim_) &&
        storage_->given.compare_exchange_strong(free, keep + more)) {
        out.storage_ = storage_;
        return out;
    }
    return copied(keep, more, spare);
}

bool GrowingRows::hasRoom(int64_t least) const {
    return !storage_ || (storage_->data.size(dim_) - rows_ >= least && storage_->given == rows_);
}

GrowingRows GrowingRows::withRoom(int64_t least, int64_t spare) const {
    return hasRoom(least) ? *this : copied(rows_, 0, spare);
}

GrowingRows GrowingRows::copied(int64_t keep, int64_t more, int64_t spare) const {
    GrowingRows out;
    out.dim_ = dim_;
    out.rows_ = keep + more;
    auto sizes = storage_->data.sizes().vec();
    sizes[size_t(dim_)] = keep + more + spare;
    out.storage_ = std::make_shared<Storage>();
    out.storage_->data = torch::empty(sizes, storage_->data.options());
    out.storage_->data.narrow(dim_, 0, keep).copy_(storage_->data.narrow(dim_, 0, keep));
    out.storage_->given = keep + more;
    return out;
}

int64_t roomAfter(int64_t rows) {
    return std::max<int64_t>(256, rows / 8);
}

int64_t CaptureMemory::bytes() const {
    int64_t total = 0;
    for (const auto* list : {&keys, &values, &queries, &headOutputs, &ffnInput, &slotActivations,
                             &ffnOutput, &residual}) {
        for (const auto& rows : *list) {
            const auto t = rows.tensor();
            if (t.defined()) total += t.numel() * int64_t(t.element_size());
        }
    }
    return total;
}

namespace {
// The room a memory of `rows` rows should have: a quarter of what a copy is given, so that a
// memory grown in place a few words keeps its storage.
int64_t leastRoom(int64_t rows) {
    return roomAfter(rows) / 4;
}
}  // namespace

bool CaptureMemory::needsRoom() const {
    const int64_t least = leastRoom(int64_t(ids.size()));
    for (const auto* list : {&keys, &values, &queries, &headOutputs, &ffnInput, &slotActivations,
                             &ffnOutput, &residual}) {
        for (const auto& rows : *list) {
            if (!rows.hasRoom(least)) return true;
        }
    }
    return false;
}

std::shared_ptr<const CaptureMemory> CaptureMemory::withRoom(
    const std::function<bool()>& stop) const {
    auto grown = std::make_shared<CaptureMemory>(*this);
    const int64_t spare = roomAfter(int64_t(ids.size()));
    for (auto* list :
         {&grown->keys, &grown->values, &grown->queries, &grown->headOutputs, &grown->ffnInput,
          &grown->slotActivations, &grown->ffnOutput, &grown->residual}) {
        for (auto& rows : *list) {
            if (stop && stop()) return grown;
            rows = rows.withRoom(leastRoom(int64_t(ids.size())), spare);
        }
    }
    return grown;
}

}  // namespace relulens::core
