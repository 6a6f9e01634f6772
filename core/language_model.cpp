#include "core/language_model.h"

#include <atomic>
#include <cmath>
#include <optional>

#include <c10/core/GradMode.h>

#include "core/attention.h"
#include "core/fused_attention.h"
#include "core/second_core.h"

namespace relulens::core {

Status LanguageModel::supports(const RunSpec& run) const {
    if (auto s = validateAttentionSpec(run.attention); !s) return s;
    if (auto s = validateOverrides(run, info().nLayers, info().nHeads); !s) return s;
    const auto choices = info().ffnChoices();
    for (auto kind : choices) {
        if (kind == run.ffn) return {};
    }
    std::string names;
    for (auto kind : choices) names += (names.empty() ? "" : ", ") + ffnKindName(kind);
    if (info().gatedFfn) {
        return Error{"FFN variant " + ffnKindName(run.ffn) +
                     " is defined for ungated memories only; " + info().name +
                     " has a gated FFN, whose gate activation can be " + names};
    }
    return Error{"FFN variant " + ffnKindName(run.ffn) + " does not apply to " + info().name +
                 " (its FFN runs " + names + ")"};
}

double LanguageModel::attentionScale() const {
    return 1.0 / std::sqrt(double(info().headDim));
}

int64_t attentionBlockRows(int64_t heads, int64_t tokens) {
    // Small blocks stay in the CPU's cache through the activation and the diagnostics (a
    // quarter-million floats measured 3× faster than 16 M at 2,048 tokens), but not fewer than
    // 128 rows: with the heads in two parts on two cores, 128 measured a quarter faster than 64
    // and far faster than 256 or more at 8,192 tokens (relulens bench --no-gui).
    constexpr int64_t kBlockFloats = int64_t(1) << 18;
    const int64_t rows = kBlockFloats / std::max<int64_t>(1, heads * tokens);
    return rows >= tokens ? std::max<int64_t>(tokens, 1) : std::max<int64_t>(rows, 128);
}

torch::Tensor ropeFrequencies(int64_t headDim, double base) {
    auto options = torch::TensorOptions().dtype(torch::kFloat64);
    const int64_t half = headDim / 2;
    return torch::pow(base, -torch::arange(0, half, options) * (2.0 / double(headDim)))
        .to(torch::kFloat32);
}

torch::Tensor applyRotary(const torch::Tensor& x, int64_t offset,
                          const torch::Tensor& inverseFrequencies) {
    const int64_t L = x.size(-2);
    const int64_t half = x.size(-1) / 2;
    // Angles in double, as positions times small frequencies lose digits in float at long inputs.
    auto dopts = torch::TensorOptions().dtype(torch::kFloat64).device(x.device());
    auto positions = torch::arange(offset, offset + L, dopts);  // (L)
    auto angles =
        torch::outer(positions, inverseFrequencies.to(x.device(), torch::kFloat64));  // (L, d/2)
    auto cos = angles.cos().to(x.dtype());
    auto sin = angles.sin().to(x.dtype());
    auto x1 = x.narrow(-1, 0, half);
    auto x2 = x.narrow(-1, half, half);
    return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

RotaryTable rotaryTable(int64_t offset, int64_t L, const torch::Tensor& inverseFrequencies,
                        const torch::TensorOptions& options) {
    // Angles in double, as applyRotary makes them.
    auto dopts = torch::TensorOptions().dtype(torch::kFloat64).device(options.device());
    auto positions = torch::arange(offset, offset + L, dopts);
    auto angles = torch::outer(
        positions, inverseFrequencies.to(options.device(), torch::kFloat64));  // (L, d/2)
    return {angles.cos().to(options.dtype()).contiguous(),
            angles.sin().to(options.dtype()).contiguous()};
}

void rotateInto(const torch::Tensor& x, const RotaryTable& table, int64_t row0, torch::Tensor out) {
    const int64_t n = x.size(-2), half = x.size(-1) / 2;
    const auto cos = table.cos.narrow(0, row0, n), sin = table.sin.narrow(0, row0, n);
    TORCH_CHECK(!out.is_alias_of(x), "rotateInto: the output shares memory with the input");
    if (x.is_cpu() && x.dim() == 4 && x.scalar_type() == torch::kFloat32 &&
        out.scalar_type() == torch::kFloat32 && cos.scalar_type() == torch::kFloat32 &&
        x.stride(3) == 1 && out.stride(3) == 1 && cos.is_contiguous() && sin.is_contiguous()) {
        const float* xp = x.data_ptr<float>();
        float* op = out.data_ptr<float>();
        const float* cp = cos.data_ptr<float>();  // rows `half` apart
        const float* sp = sin.data_ptr<float>();
        for (int64_t b = 0; b < x.size(0); ++b) {
            for (int64_t h = 0; h < x.size(1); ++h) {
                for (int64_t r = 0; r < n; ++r) {
                    const float* x1 = xp + b * x.stride(0) + h * x.stride(1) + r * x.stride(2);
                    const float* x2 = x1 + half;
                    float* o1 = op + b * out.stride(0) + h * out.stride(1) + r * out.stride(2);
                    float* o2 = o1 + half;
                    const float* c = cp + r * half;
                    const float* s = sp + r * half;
                    // two products, then their difference or sum, as the tensor form computes
                    // them (bit for bit where the compiler fuses no multiply-add, as on
                    // x86-64 without -mfma)
                    for (int64_t i = 0; i < half; ++i) {
                        const float p = x1[i] * c[i], q = x2[i] * s[i];
                        const float u = x1[i] * s[i], w = x2[i] * c[i];
                        o1[i] = p - q;
                        o2[i] = u + w;
                    }
                }
            }
        }
        return;
    }
    const auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
    out.narrow(-1, 0, half).copy_(x1 * cos - x2 * sin);
    out.narrow(-1, half, half).copy_(x1 * sin + x2 * cos);
}

torch::Tensor blockedAttention(const torch::Tensor& q, const torch::Tensor& kIn,
                               const torch::Tensor& vIn, const RunSpec& run,
                               const torch::Tensor& gamma, double scale, int64_t window,
                               int64_t layer, ForwardTrace* trace) {
    const int64_t B = q.size(0), H = q.size(1), Q = q.size(2), L = kIn.size(2);
    const int64_t past = L - Q;  // rows are positions past..L-1
    const int64_t group = H / kIn.size(1);
    const bool fullMaps = trace && (trace->options.scores || trace->options.weights);
    const bool rowMass = trace && trace->options.rowMass;
    // A pass that keeps nothing of the attention but its output (logits only, or a trace of the
    // residual stream or the FFN) takes the fused kernel where it applies.
    const bool keepsAttention =
        trace && (fullMaps || rowMass || trace->onAttentionBlock ||
                  (trace->onSplitRow && trace->splitRow > past && trace->splitRow < L));
    if (!keepsAttention && fusedAttentionApplies(q, run, layer)) {
        return fusedAttention(q, kIn, vIn, run.attention, gamma, scale, window,
                              trace ? trace->cancelled : std::function<bool()>{});
    }
    // Grouped-query attention: query head h reads kv head h / group.
    auto k = group == 1 ? kIn : kIn.repeat_interleave(group, 1);  // (B, H, L, dh)
    auto v = group == 1 ? vIn : vIn.repeat_interleave(group, 1);
    int64_t rows = Q;
    if (!fullMaps)
        rows = trace && trace->blockRows > 0 ? trace->blockRows : attentionBlockRows(H, L);
    // The heads of each block in two parts on two cores (CPU inference only: autograd keeps the
    // one-thread path, and whole maps are one block).
    const bool twoParts =
        !fullMaps && H >= 2 && q.is_cpu() && !c10::GradMode::is_enabled() && secondCoreAvailable();
    const int64_t split = twoParts ? H / 2 : H;
    // Inference writes each block's scores, and then its weights in their place, into one buffer
    // per part that lives for the layer: a fresh block per step cost a page fault every 4 KB
    // (a tenth of the pass at 8,192 tokens). Whole maps are kept, and autograd keeps every
    // block, so both take fresh tensors.
    const bool reuse = !fullMaps && !c10::GradMode::is_enabled();
    struct Part {
        int64_t h0, n;
        torch::Tensor gamma;  // (B · n) or undefined
        std::vector<torch::Tensor> out, mass;
        torch::Tensor scratch;  // room for one block's (B · n, R, K) when `reuse`
    };
    std::vector<Part> parts;
    for (int64_t h0 = 0; h0 < H; h0 += split) {
        const int64_t n = std::min(split, H - h0);
        parts.push_back(
            {h0, n, gamma.defined() ? gamma.narrow(0, h0, n).repeat({B}) : gamma, {}, {}});
    }
    torch::Tensor scores, weights;
    auto runPart = [&](Part& p, int64_t r0, int64_t R, int64_t K) {
        const int64_t row = past + r0;  // position of the block's first row
        const auto qp = q.narrow(1, p.h0, p.n).narrow(2, r0, R).flatten(0, 1);  // (B · n, R, dh)
        const auto kp = k.narrow(1, p.h0, p.n).narrow(2, 0, K).flatten(0, 1);
        torch::Tensor s;
        if (reuse) {
            if (!p.scratch.defined())
                p.scratch = torch::empty({B * p.n * std::min(rows, Q) * L}, q.options());
            s = p.scratch.narrow(0, 0, B * p.n * R * K).view({B * p.n, R, K});
            // The scale on the block's queries (R × dh) rather than a pass over its scores.
            at::bmm_out(s, qp * scale, kp.transpose(1, 2));
        } else {
            s = torch::matmul(qp, kp.transpose(1, 2)) * scale;
        }
        auto w = layerAttentionWeights(s, run, layer, p.h0, p.n, p.gamma, row, !fullMaps, window)
                     .view({B, p.n, R, K});
        p.out.push_back(torch::matmul(w, v.narrow(1, p.h0, p.n).narrow(2, 0, K)));
        if (rowMass) p.mass.push_back(w.sum(-1));
        if (trace && trace->onAttentionBlock) trace->onAttentionBlock(layer, row, p.h0, w);
        if (fullMaps) {
            scores = s.view({B, p.n, R, K});
            weights = w;
        }
    };
    std::optional<SingleThreadedBlas> oneBlasThread;
    if (twoParts) oneBlasThread.emplace();
    // Each part goes through its blocks of rows on its own core, without waiting for the other
    // part between blocks (a hand-over costs ~26 µs here); both meet only at the split row.
    std::atomic<bool> stopped{false};
    // A part stops at its next block once the pass is cancelled or the other part has failed.
    auto runBlocks = [&](Part& p, int64_t from, int64_t to) {
        for (int64_t r0 = from; r0 < to;) {
            if (stopped) return;
            if (trace && trace->cancelled && trace->cancelled()) {
                stopped = true;
                return;
            }
            const int64_t R = std::min(rows, to - r0);
            const int64_t K =
                fullMaps ? L : past + r0 + R;  // keys past the block's last row are masked
            try {
                runPart(p, r0, R, K);
            } catch (...) {
                stopped = true;
                throw;
            }
            r0 += R;
        }
    };
    auto runRows = [&](int64_t from, int64_t to) {
        if (parts.size() == 2) {
            runOnTwoCores([&] { runBlocks(parts[0], from, to); },
                          [&] { runBlocks(parts[1], from, to); });
        } else {
            runBlocks(parts[0], from, to);
        }
    };
    const int64_t splitAt = trace && trace->splitRow > past ? trace->splitRow - past : -1;
    if (splitAt > 0 && splitAt < Q) {
        runRows(0, splitAt);
        if (stopped) return {};
        if (trace->onSplitRow) trace->onSplitRow(layer);
        runRows(splitAt, Q);
    } else {
        runRows(0, Q);
    }
    if (stopped) return {};
    auto joined = [&](std::vector<torch::Tensor>(Part::*member), int64_t dim) {
        std::vector<torch::Tensor> all;
        for (auto& p : parts) {
            auto& blocks = p.*member;
            all.push_back(blocks.size() == 1 ? blocks[0] : torch::cat(blocks, dim));
        }
        return all.size() == 1 ? all[0] : torch::cat(all, 1);
    };
    if (trace) {
        auto& t = trace->layers[size_t(layer)];
        if (trace->options.scores) t.scores = scores;
        if (trace->options.weights) t.weights = weights;
        if (rowMass) t.rowMass = joined(&Part::mass, 2);
    }
    return joined(&Part::out, 2);  // (B, H, R, dh)
}

void ForwardTrace::keep(int64_t layer, torch::Tensor LayerTrace::*rows,
                        const torch::Tensor& fresh) {
    layers[size_t(layer)].*rows = keepRows ? keepRows(layer, rows, fresh) : fresh;
}

void keepLayer(ForwardTrace& trace, int64_t layer, const torch::Tensor& q, const torch::Tensor& k,
               const torch::Tensor& v, const torch::Tensor& headOutputs,
               const torch::Tensor& ffnInput, const torch::Tensor& slots,
               const torch::Tensor& ffnOutput) {
    auto& t = trace.layers[size_t(layer)];
    const auto& o = trace.options;
    if (o.headOutputs) trace.keep(layer, &LayerTrace::headOutputs, headOutputs);
    if (o.queriesKeys) {
        trace.keep(layer, &LayerTrace::q, q);
        t.k = k;
    }
    if (o.values) {
        t.k = k;
        t.v = v;
    }
    if (o.ffn) {
        trace.keep(layer, &LayerTrace::ffnInput, ffnInput);
        trace.keep(layer, &LayerTrace::slotActivations, slots);
        trace.keep(layer, &LayerTrace::ffnOutput, ffnOutput);
    }
}

std::pair<torch::Tensor, torch::Tensor> withPast(const ForwardTrace* trace, int64_t layer,
                                                 const torch::Tensor& k, const torch::Tensor& v) {
    if (!trace) return {k, v};
    if (!trace->keyRoom.empty()) {
        const auto& keys = trace->keyRoom[size_t(layer)];
        const auto& values = trace->valueRoom[size_t(layer)];
        const int64_t past = trace->pastLength();
        keys.narrow(2, past, k.size(2)).copy_(k);
        values.narrow(2, past, v.size(2)).copy_(v);
        return {keys, values};
    }
    if (trace->pastKeys.empty()) return {k, v};
    return {torch::cat({trace->pastKeys[size_t(layer)], k}, 2),
            torch::cat({trace->pastValues[size_t(layer)], v}, 2)};
}

}  // namespace relulens::core
