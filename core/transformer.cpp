#include "core/transformer.h"

#include <cmath>

#include <c10/core/GradMode.h>

#include "core/attention.h"
#include "core/diagnostics.h"
#include "core/second_core.h"

namespace relulens::core {

ModelInfo modelInfoOf(const ModelConfig& c) {
    ModelInfo info;
    info.family = "relulens";
    info.name = c.name;
    info.description = c.description;
    info.vocabSize = c.vocabSize;
    info.dModel = c.dModel;
    info.nLayers = c.nLayers;
    info.nHeads = c.nHeads;
    info.nKvHeads = c.nHeads;
    info.headDim = c.headDim();
    info.dFf = c.dFf;
    info.contextLength = c.contextLength;
    info.trained = c.trained;
    info.gatedFfn = false;
    info.windows.assign(size_t(c.nLayers), 0);
    info.parameters = c.parameterCount();
    return info;
}

Transformer Transformer::initialise(const ModelConfig& config, uint64_t seed, double std,
                                    bool perturbAll) {
    torch::manual_seed(seed);
    TensorMap tensors;
    const double residualStd = std / std::sqrt(2.0 * double(config.nLayers));
    for (const auto& t : config.tensorShapes()) {
        const std::string& n = t.name;
        auto ends = [&](const std::string& suffix) {
            return n.size() >= suffix.size() &&
                   n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
        };
        torch::Tensor value;
        if (ends("attn.gamma")) {
            value = perturbAll ? torch::rand(t.shape) + 0.5 : torch::ones(t.shape);
        } else if (ends("ln1.weight") || ends("ln2.weight") || ends("ln.weight") ||
                   ends("ln_f.weight")) {
            value = perturbAll ? 1.0 + 0.2 * torch::randn(t.shape) : torch::ones(t.shape);
        } else if (ends(".bias") || ends("ffn.b1") || ends("ffn.b2")) {
            value = perturbAll ? 0.2 * torch::randn(t.shape) : torch::zeros(t.shape);
        } else if (ends("attn.wo") || ends("ffn.w2")) {
            value = torch::randn(t.shape) * residualStd;
        } else {
            value = torch::randn(t.shape) * std;
        }
        tensors[n] = value;
    }
    return fromTensors(config, std::move(tensors));
}

Transformer Transformer::fromTensors(const ModelConfig& config, TensorMap tensors) {
    Transformer model;
    model.config_ = config;
    model.info_ = modelInfoOf(config);
    model.tensors_ = std::move(tensors);
    model.resolve();
    return model;
}

void Transformer::resolve() {
    auto at = [this](const std::string& name) -> const torch::Tensor& {
        auto it = tensors_.find(name);
        if (it == tensors_.end()) throw std::out_of_range("no tensor " + name);
        return it->second;
    };
    embedding_ = at("tok_emb.weight");
    lnFWeight_ = at("ln_f.weight");
    lnFBias_ = at("ln_f.bias");
    layers_.clear();
    for (int64_t l = 0; l < config_.nLayers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        Layer layer;
        layer.ln1Weight = at(p + "ln1.weight");
        layer.ln1Bias = at(p + "ln1.bias");
        layer.wq = at(p + "attn.wq");
        layer.wk = at(p + "attn.wk");
        layer.wv = at(p + "attn.wv");
        layer.wo = at(p + "attn.wo");
        layer.gamma = at(p + "attn.gamma");
        layer.ln2Weight = at(p + "ln2.weight");
        layer.ln2Bias = at(p + "ln2.bias");
        layer.ffn = FfnWeights{at(p + "ffn.w1"), at(p + "ffn.b1"),        at(p + "ffn.w2"),
                               at(p + "ffn.b2"), at(p + "ffn.ln.weight"), at(p + "ffn.ln.bias"),
                               config_.normEps};
        layers_.push_back(std::move(layer));
    }
    frequencies_ = ropeFrequencies(config_.headDim(), config_.ropeBase).to(embedding_.device());
}

std::vector<torch::Tensor> Transformer::parameters() const {
    std::vector<torch::Tensor> out;
    for (const auto& t : config_.tensorShapes()) out.push_back(tensors_.at(t.name));
    return out;
}

torch::Device Transformer::device() const {
    return embedding_.device();
}

void Transformer::to(const torch::Device& device) {
    for (auto& [name, t] : tensors_) t = t.to(device);
    resolve();
}

void Transformer::setRequiresGrad(bool requiresGrad) {
    for (auto& [name, t] : tensors_) t.set_requires_grad(requiresGrad);
}

torch::Tensor Transformer::attentionGamma(int64_t layer) const {
    return layers_.at(size_t(layer)).gamma;
}

torch::Tensor Transformer::slotValues(int64_t layer) const {
    return layers_.at(size_t(layer)).ffn.w2;
}

torch::Tensor Transformer::outputEmbedding() const {
    return embedding_;
}

FfnDiagnostics Transformer::ffnDiagnostics(int64_t layer, const torch::Tensor& input,
                                           const torch::Tensor& slots, const torch::Tensor& output,
                                           FfnKind kind, double tauScale) const {
    return core::ffnDiagnostics(input, slots, layers_.at(size_t(layer)).ffn, kind, tauScale,
                                output);
}

torch::Tensor Transformer::forwardOnTwoCores(const torch::Tensor& ids, const RunSpec& run,
                                             ForwardTrace* trace) const {
    const auto& c = config_;
    const int64_t B = ids.size(0), L = ids.size(1), H = c.nHeads, dh = c.headDim(), d = c.dModel;
    const double scale = 1.0 / std::sqrt(double(dh));
    const int64_t past = trace ? trace->pastLength() : 0;  // positions of ids start here
    if (trace) trace->layers.assign(size_t(c.nLayers), LayerTrace{});
    const bool keepFfn = trace && trace->options.ffn;
    // Each half multiplies on its own core: OpenBLAS's threads would only contend with them
    // (and spin between calls).
    SingleThreadedBlas oneBlasThread;
    const auto rotary = rotaryTable(past, L, frequencies_, embedding_.options());  // every layer's
    const int64_t start = trace && trace->startResidual.defined() ? trace->startLayer : 0;
    auto x = start > 0 ? trace->startResidual : torch::embedding(embedding_, ids);  // (B, L, d)
    for (int64_t l = start; l < c.nLayers; ++l) {
        const Layer& w = layers_[size_t(l)];
        if (trace && trace->options.residual) trace->keep(l, &LayerTrace::residual, x);
        auto q = torch::empty({B, H, L, dh}, x.options());
        auto newKeys = torch::empty_like(q), newValues = torch::empty_like(q);
        inRowHalves(L, [&](int64_t r0, int64_t n) {
            const auto h =
                torch::layer_norm(x.narrow(1, r0, n), {d}, w.ln1Weight, w.ln1Bias, c.normEps);
            auto heads = [&](const torch::Tensor& weight) {  // (B, n, d) -> (B, H, n, dh)
                return torch::linear(h, weight).view({B, n, H, dh}).transpose(1, 2);
            };
            rotateInto(heads(w.wq), rotary, r0, q.narrow(2, r0, n));
            rotateInto(heads(w.wk), rotary, r0, newKeys.narrow(2, r0, n));
            newValues.narrow(2, r0, n).copy_(heads(w.wv));
        });
        const auto [k, v] = withPast(trace, l, newKeys, newValues);
        const auto headOut = blockedAttention(q, k, v, run, w.gamma, scale, 0, l, trace);
        if (!headOut.defined()) return {};
        // The stream after the layer, in a tensor of its own: the one before may be kept.
        auto next = torch::empty_like(x);
        torch::Tensor f, slots, ffnOut;  // whole, when the trace keeps them
        if (keepFfn) {
            f = torch::empty_like(x);
            slots = torch::empty({B, L, c.dFf}, x.options());
            ffnOut = torch::empty_like(x);
        }
        inRowHalves(L, [&](int64_t r0, int64_t n) {
            auto mid =
                x.narrow(1, r0, n) +
                torch::linear(headOut.narrow(2, r0, n).transpose(1, 2).reshape({B, n, d}), w.wo);
            const auto fs = torch::layer_norm(mid, {d}, w.ln2Weight, w.ln2Bias, c.normEps);
            const auto slotRows = ffnSlotActivations(fs, w.ffn, run.ffn);
            const auto out = ffnOutput(slotRows, w.ffn, run.ffn);
            next.narrow(1, r0, n).copy_(mid.add_(out));
            if (keepFfn) {
                f.narrow(1, r0, n).copy_(fs);
                slots.narrow(1, r0, n).copy_(slotRows);
                ffnOut.narrow(1, r0, n).copy_(out);
            }
        });
        x = next;
        if (trace) keepLayer(*trace, l, q, k, v, headOut, f, slots, ffnOut);
    }
    if (trace && trace->options.residual) trace->finalResidual = x;
    if (trace && trace->stopBeforeLogits) return x;
    auto logits = torch::empty({1, L, c.vocabSize}, x.options());
    inRowHalves(L, [&](int64_t r0, int64_t n) {
        const auto xs =
            torch::layer_norm(x[0].narrow(0, r0, n), {d}, lnFWeight_, lnFBias_, c.normEps);
        auto out = logits[0].narrow(0, r0, n);
        at::mm_out(out, xs, embedding_.t());  // tied output embedding
    });
    return logits;
}

torch::Tensor Transformer::forward(const torch::Tensor& ids, const RunSpec& run,
                                   ForwardTrace* trace) const {
    // One text on a two-core CPU, without autograd: the row halves (measured there; with more
    // cores OpenBLAS's own threads have more to give, and a batch of texts keeps them too).
    if (ids.size(0) == 1 && ids.is_cpu() && embedding_.is_cpu() && !c10::GradMode::is_enabled() &&
        twoCoresExactly()) {
        return forwardOnTwoCores(ids, run, trace);
    }
    const auto& c = config_;
    const int64_t B = ids.size(0), L = ids.size(1), H = c.nHeads, dh = c.headDim();
    const double scale = 1.0 / std::sqrt(double(dh));
    const int64_t past = trace ? trace->pastLength() : 0;  // positions of ids start here
    if (trace) trace->layers.assign(size_t(c.nLayers), LayerTrace{});

    const int64_t start = trace && trace->startResidual.defined() ? trace->startLayer : 0;
    auto x = start > 0 ? trace->startResidual : torch::embedding(embedding_, ids);  // (B, L, d)
    for (int64_t l = start; l < c.nLayers; ++l) {
        const Layer& w = layers_[size_t(l)];
        if (trace && trace->options.residual) trace->keep(l, &LayerTrace::residual, x);
        auto h = torch::layer_norm(x, {c.dModel}, w.ln1Weight, w.ln1Bias, c.normEps);
        auto heads = [&](const torch::Tensor& weight) {  // (B, L, d) -> (B, H, L, dh)
            return torch::linear(h, weight).view({B, L, H, dh}).transpose(1, 2);
        };
        auto q = applyRotary(heads(w.wq), past, frequencies_);
        auto [k, v] = withPast(trace, l, applyRotary(heads(w.wk), past, frequencies_), heads(w.wv));
        auto headOut = blockedAttention(q, k, v, run, w.gamma, scale, 0, l, trace);
        if (!headOut.defined()) return {};
        x = x + torch::linear(headOut.transpose(1, 2).reshape({B, L, c.dModel}), w.wo);

        auto f = torch::layer_norm(x, {c.dModel}, w.ln2Weight, w.ln2Bias, c.normEps);
        auto slots = ffnSlotActivations(f, w.ffn, run.ffn);  // (B, L, d_ff)
        const auto ffnOut = ffnOutput(slots, w.ffn, run.ffn);
        x = x + ffnOut;

        if (trace) keepLayer(*trace, l, q, k, v, headOut, f, slots, ffnOut);
    }
    if (trace && trace->options.residual) trace->finalResidual = x;
    if (trace && trace->stopBeforeLogits) return x;
    return logitsFromResidual(x);
}

torch::Tensor Transformer::logitsFromResidual(const torch::Tensor& stream) const {
    const auto x =
        torch::layer_norm(stream, {config_.dModel}, lnFWeight_, lnFBias_, config_.normEps);
    return torch::linear(x, embedding_);  // tied output embedding
}

}  // namespace relulens::core
