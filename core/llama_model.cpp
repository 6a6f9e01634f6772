#include "core/llama_model.h"

#include <cmath>

#include "core/diagnostics.h"

namespace relulens::core {

LlamaModel::LlamaModel(HfConfig config, ModelInfo info, Weights weights)
    : config_(std::move(config)), info_(std::move(info)), weights_(std::move(weights)) {
    const auto inverse = hfRopeFrequencies(config_);
    frequencies_ = torch::tensor(inverse, torch::kFloat64).to(torch::kFloat32);
    gamma_ = torch::ones({config_.heads});
}

void LlamaModel::to(const torch::Device& device) {
    auto move = [&](torch::Tensor& t) {
        if (t.defined()) t = t.to(device);
    };
    const bool tied = weights_.output.is_same(weights_.embedding);
    move(weights_.embedding);
    move(weights_.finalNorm);
    if (tied)
        weights_.output = weights_.embedding;
    else
        move(weights_.output);
    for (auto& l : weights_.layers) {
        for (torch::Tensor* t : {&l.inputNorm, &l.postNorm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq,
                                 &l.bk, &l.bv, &l.bo, &l.qNorm, &l.kNorm, &l.ffn.gate, &l.ffn.up,
                                 &l.ffn.down, &l.ffn.gateBias, &l.ffn.upBias, &l.ffn.downBias}) {
            move(*t);
        }
    }
    move(frequencies_);
    move(gamma_);
}

torch::Tensor LlamaModel::rmsNorm(const torch::Tensor& x, const torch::Tensor& weight) const {
    const auto x32 = x.to(torch::kFloat32);
    return x32 * torch::rsqrt(x32.square().mean(-1, /*keepdim=*/true) + config_.rmsEps) * weight;
}

torch::Tensor LlamaModel::attentionGamma(int64_t) const {
    return gamma_;
}

torch::Tensor LlamaModel::slotValues(int64_t layer) const {
    return weights_.layers.at(size_t(layer)).ffn.down;
}

FfnDiagnostics LlamaModel::ffnDiagnostics(int64_t layer, const torch::Tensor&,
                                          const torch::Tensor& slots, const torch::Tensor& output,
                                          FfnKind kind, double tauScale) const {
    return gatedFfnDiagnostics(slots, output, weights_.layers.at(size_t(layer)).ffn, kind,
                               tauScale);
}

torch::Tensor LlamaModel::forward(const torch::Tensor& ids, const RunSpec& run,
                                  ForwardTrace* trace) const {
    const auto& c = config_;
    const int64_t B = ids.size(0), L = ids.size(1), H = c.heads, KV = c.kvHeads, dh = c.headDim;
    const double scale = 1.0 / std::sqrt(double(dh));
    const int64_t past = trace ? trace->pastLength() : 0;  // positions of ids start here
    if (trace) trace->layers.assign(size_t(c.layers), LayerTrace{});

    const int64_t start = trace && trace->startResidual.defined() ? trace->startLayer : 0;
    torch::Tensor x;  // (B, L, d)
    if (start > 0) {
        x = trace->startResidual;
    } else {
        x = torch::embedding(weights_.embedding, ids);
        if (c.gemma) x = x * float(std::sqrt(double(c.hidden)));
    }
    for (int64_t l = start; l < c.layers; ++l) {
        const Layer& w = weights_.layers[size_t(l)];
        if (trace && trace->options.residual) trace->keep(l, &LayerTrace::residual, x);
        const auto h = rmsNorm(x, w.inputNorm);
        auto heads = [&](const torch::Tensor& weight, const torch::Tensor& bias, int64_t n) {
            return torch::linear(h, weight, bias)
                .view({B, L, n, dh})
                .transpose(1, 2);  // (B, n, L, dh)
        };
        auto q = heads(w.wq, w.bq, H);
        auto k = heads(w.wk, w.bk, KV);
        auto newValues = heads(w.wv, w.bv, KV);
        if (c.qkNorm) {
            q = rmsNorm(q, w.qNorm);
            k = rmsNorm(k, w.kNorm);
        }
        q = applyRotary(q, past, frequencies_);
        auto [keys, v] = withPast(trace, l, applyRotary(k, past, frequencies_), newValues);
        k = keys;
        auto headOut =
            blockedAttention(q, k, v, run, gamma_, scale, c.windows[size_t(l)], l, trace);
        if (!headOut.defined()) return {};
        x = x + torch::linear(headOut.transpose(1, 2).reshape({B, L, H * dh}), w.wo, w.bo);

        const auto f = rmsNorm(x, w.postNorm);
        const auto slots = gatedSlotActivations(f, w.ffn, run.ffn);  // (B, L, d_ff)
        const auto ffnOut = gatedFfnOutput(slots, w.ffn);            // (B, L, d)
        x = x + ffnOut;

        if (trace) keepLayer(*trace, l, q, k, v, headOut, f, slots, ffnOut);
    }
    if (trace && trace->options.residual) trace->finalResidual = x;
    if (trace && trace->stopBeforeLogits) return x;
    return logitsFromResidual(x);
}

torch::Tensor LlamaModel::logitsFromResidual(const torch::Tensor& stream) const {
    return torch::linear(rmsNorm(stream, weights_.finalNorm), weights_.output);
}

}  // namespace relulens::core
