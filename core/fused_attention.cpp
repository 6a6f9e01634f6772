#include "core/fused_attention.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <vector>

#include <c10/core/GradMode.h>

#include "core/cpu_kernels.h"
#include "core/second_core.h"

// The kernels are x86-64 AVX2 and FMA code (core/fused_attention_avx2.cpp), run where the
// processor has both; elsewhere every layer takes the blocked path.
#if defined(RELULENS_AVX2_KERNELS)
#include "core/fused_attention_kernels.h"
#endif

namespace relulens::core {
namespace {
std::atomic<int64_t> layersComputed{0};
}  // namespace

int64_t fusedAttentionLayers() {
    return layersComputed.load();
}

#if defined(RELULENS_AVX2_KERNELS)
namespace {

using namespace fused;

// Room of one core (fused::Room), owned.
struct Scratch {
    std::vector<float> scores, queries, out, maxima, sums;
    explicit Scratch(const Layer& a)
        : scores(size_t(kTileRows * kTileKeys)),
          queries(size_t(kTileRows * a.dh)),
          out(size_t(kTileRows * a.width)),
          maxima(kTileRows),
          sums(kTileRows) {}
    Room room() { return {scores.data(), queries.data(), out.data(), maxima.data(), sums.data()}; }
};

// Keys (n, L, dh) into panels (n, ⌈L / 16⌉, dh, 16), keys past L zero.
void packKeys(const float* k, int64_t L, int64_t dh, int64_t n, float* panels) {
    const int64_t perHead = (L + kPanel - 1) / kPanel * dh * kPanel;
    std::memset(panels, 0, sizeof(float) * size_t(n * perHead));
    for (int64_t head = 0; head < n; ++head) {
        const float* key = k + head * L * dh;
        float* to = panels + head * perHead;
        for (int64_t j = 0; j < L; ++j) {
            float* panel = to + (j / kPanel) * dh * kPanel + j % kPanel;
            for (int64_t d = 0; d < dh; ++d) panel[d * kPanel] = key[j * dh + d];
        }
    }
}

}  // namespace

bool fusedAttentionApplies(const torch::Tensor& q, const RunSpec& run, int64_t layer) {
    if (!q.is_cpu() || q.scalar_type() != torch::kFloat32 || c10::GradMode::is_enabled())
        return false;
    if (!avx2KernelsRun() || run.overridesLayer(layer)) return false;
    const auto& spec = run.attention;
    switch (spec.kind) {
        case AttentionKind::Softmax:
        case AttentionKind::Relu:
        case AttentionKind::ReluLen:
        case AttentionKind::ReluFormer:
            return true;
        case AttentionKind::Family:
            return spec.familyFunction == FamilyFunction::Relu ||
                   spec.familyFunction == FamilyFunction::Relu2;
        default:
            return false;
    }
}

torch::Tensor fusedAttention(const torch::Tensor& qIn, const torch::Tensor& kIn,
                             const torch::Tensor& vIn, const AttentionSpec& spec,
                             const torch::Tensor& gammaIn, double scale, int64_t window,
                             const std::function<bool()>& cancelled) {
    const auto q = qIn.contiguous(), k = kIn.contiguous();
    const auto gamma =
        gammaIn.defined() ? gammaIn.to(torch::kCPU, torch::kFloat32).contiguous() : gammaIn;
    const int64_t B = q.size(0), Hkv = k.size(1), L = k.size(2), dh = q.size(3);
    const int64_t width = (dh + 7) / 8 * 8;
    // Values padded with zeros to a multiple of 8 floats where d_head is not one.
    const auto v =
        width == dh ? vIn.contiguous() : torch::constant_pad_nd(vIn, {0, width - dh}).contiguous();
    const int64_t panelsPerHead = (L + kPanel - 1) / kPanel;
    auto panels = torch::empty({B * Hkv, panelsPerHead, dh, kPanel}, q.options());
    auto out = torch::empty_like(q, at::MemoryFormat::Contiguous);
    Layer a{q.data_ptr<float>(),
            panels.data_ptr<float>(),
            v.data_ptr<float>(),
            out.data_ptr<float>(),
            B,
            q.size(1),
            Hkv,
            q.size(2),
            L,
            dh,
            window,
            width,
            width,
            panelsPerHead,
            float(scale),
            Activation::Softmax,
            spec.lengthExponent,
            false,
            gamma.defined() ? gamma.data_ptr<float>() : nullptr};
    {
        // The keys of each head packed once for all its blocks of rows, half on each core.
        const int64_t heads = B * Hkv, half = heads / 2;
        const float* keys = k.data_ptr<float>();
        float* to = panels.data_ptr<float>();
        const int64_t perHead = panelsPerHead * dh * kPanel;
        runOnTwoCores(
            [&] { packKeys(keys, L, dh, half, to); },
            [&] { packKeys(keys + half * L * dh, L, dh, heads - half, to + half * perHead); });
    }
    switch (spec.kind) {
        case AttentionKind::Softmax:
            break;
        case AttentionKind::Relu:
            a.activation = Activation::Relu;
            a.lengthExponent = 0;
            break;
        case AttentionKind::ReluLen:
            a.activation = Activation::Relu;
            break;
        case AttentionKind::ReluFormer:
            a.activation = Activation::Relu;
            a.reluFormer = true;
            break;
        default:  // Family, relu or relu² (fusedAttentionApplies)
            a.activation =
                spec.familyFunction == FamilyFunction::Relu2 ? Activation::Relu2 : Activation::Relu;
            break;
    }
    // Work items are (row block, text, head), the costliest (last) row blocks first, taken in
    // turn by the two cores so that neither waits long for the other at the end.
    const int64_t blocks = (a.Q + kTileRows - 1) / kTileRows;
    const int64_t items = blocks * a.B * a.H;
    std::atomic<int64_t> next{0};
    std::atomic<bool> stopped{false};
    auto work = [&] {
        std::optional<Scratch> room;
        try {
            room.emplace(a);
        } catch (...) {
            stopped = true;  // the other core stops too; runOnTwoCores rethrows this
            throw;
        }
        const Room scratch = room->room();
        for (int64_t item = next++; item < items && !stopped; item = next++) {
            if (cancelled && cancelled()) {
                stopped = true;
                return;
            }
            const int64_t block = blocks - 1 - item / (a.B * a.H);
            const int64_t b = item % (a.B * a.H) / a.H, h = item % a.H;
            const int64_t r0 = block * kTileRows;
            attendRows(a, b, h, r0, std::min(kTileRows, a.Q - r0), scratch);
        }
    };
    runOnTwoCores(work, work);
    if (stopped) return {};
    ++layersComputed;
    return out;
}

#else

bool fusedAttentionApplies(const torch::Tensor&, const RunSpec&, int64_t) {
    return false;
}

torch::Tensor fusedAttention(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                             const AttentionSpec&, const torch::Tensor&, double, int64_t,
                             const std::function<bool()>&) {
    TORCH_CHECK(false, "the fused attention kernel runs on x86-64 processors only");
}

#endif
}  // namespace relulens::core
