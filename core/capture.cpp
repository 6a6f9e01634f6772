#include "core/capture.h"

#include <chrono>
#include <cmath>

#include <torch/csrc/autograd/grad_mode.h>

namespace relulens::core {

bool sameVariants(const RunSpec& a, const RunSpec& b) {
    return a.attention == b.attention && a.ffn == b.ffn;
}

CaptureRequest viewerRequest(const RunSpec& run, double tauScale) {
    CaptureRequest request;
    request.run = run;
    request.lazyMaps = true;
    request.slotActivations = true;
    request.diagnostics = true;
    request.tauScale = tauScale;
    request.topK = 10;
    request.overviewCells = 512;
    return request;
}

CaptureRequest mapsOnlyRequest(const RunSpec& run) {
    CaptureRequest request = viewerRequest(run, 0.1);
    request.diagnostics = false;
    request.slotActivations = false;
    request.topK = 1;
    return request;
}

namespace {

std::vector<std::vector<Prediction>> topPredictions(const torch::Tensor& logitsIn, int k,
                                                    const Tokenizer& tokenizer) {
    // logits: (L, V). Rows past the tokenizer's pieces pad the embedding (some checkpoints
    // round their vocabulary up) and are never predicted.
    auto logits = logitsIn.to(torch::kFloat32);
    if (tokenizer.vocabSize() < logits.size(-1)) logits = logits.narrow(-1, 0, tokenizer.vocabSize());
    auto probabilities = torch::softmax(logits, -1);
    auto [values, indices] = probabilities.topk(std::min<int64_t>(k, logits.size(-1)), -1);
    values = values.to(torch::kCPU).contiguous();
    indices = indices.to(torch::kCPU).contiguous();
    std::vector<std::vector<Prediction>> out(size_t(logits.size(0)));
    for (int64_t i = 0; i < values.size(0); ++i) {
        for (int64_t j = 0; j < values.size(1); ++j) {
            const int64_t id = indices[i][j].item<int64_t>();
            out[size_t(i)].push_back({id, tokenizer.piece(id), tokenizer.readable(id), values[i][j].item<double>()});
        }
    }
    return out;
}

}  // namespace

Result<CaptureResult> capture(const LanguageModel& model, const Tokenizer& tokenizer,
                              const std::string& text, const CaptureRequest& request,
                              const std::atomic<bool>* cancel) {
    const auto& config = model.info();
    if (text.empty()) return Error{"the text is empty: type or paste something to inspect"};
    if (text.find_first_not_of(" \t\n\r\f\v") == std::string::npos) {
        return Error{"the text is only whitespace: type or paste something to inspect"};
    }
    if (const int64_t bad = firstInvalidUtf8(text); bad >= 0) {
        return Error{"the text is not valid UTF-8 (byte " + std::to_string(bad) +
                     "): convert it to UTF-8 first"};
    }
    if (auto s = model.supports(request.run); !s) return Error{s.error()};
    for (const auto& ref : request.maps) {
        if (ref.layer < 0 || ref.layer >= config.nLayers || ref.head < 0 ||
            ref.head >= config.nHeads) {
            return Error{"no head " + std::to_string(ref.layer) + ":" + std::to_string(ref.head) +
                         " (the model has layers 0–" + std::to_string(config.nLayers - 1) +
                         " and heads 0–" + std::to_string(config.nHeads - 1) + ")"};
        }
    }
    const auto started = std::chrono::steady_clock::now();
    CaptureResult result;
    result.model = config;
    result.run = request.run;
    result.trainedWithRun = sameVariants(request.run, config.trained);
    result.tauScale = request.tauScale;
    result.device = model.device().str();
    result.tokens = tokenizer.encode(text);
    if (result.tokens.empty()) return Error{"the text produced no tokens"};
    const auto L = int64_t(result.tokens.size());
    if (L > request.maxTokens) {
        return Error{"the text has " + std::to_string(L) + " tokens; at most " +
                     std::to_string(request.maxTokens) +
                     " can be inspected at once: shorten it or inspect an excerpt"};
    }
    if (request.allMaps && L > request.maxAllMapsTokens) {
        return Error{"the text has " + std::to_string(L) + " tokens; every map at once is kept for at most " +
                     std::to_string(request.maxAllMapsTokens) +
                     " tokens: ask for single heads' maps instead"};
    }
    for (const auto& t : result.tokens) {
        if (t.id < 0 || t.id >= config.vocabSize) {
            return Error{"token id " + std::to_string(t.id) + " is outside the model's vocabulary"};
        }
    }
    std::vector<int64_t> ids;
    for (const auto& t : result.tokens) ids.push_back(t.id);

    torch::NoGradGuard noGrad;
    auto input = torch::tensor(ids, torch::kLong).view({1, L}).to(model.device());
    ForwardTrace trace;
    const bool anyMaps = request.allMaps || !request.maps.empty();
    trace.options.weights = anyMaps;
    trace.options.scores = anyMaps && request.mapScores;
    trace.options.headOutputs = request.diagnostics;
    trace.options.queriesKeys = request.lazyMaps;
    trace.blockRows = request.blockRows;
    trace.options.ffn = request.diagnostics || request.slotActivations;
    // Diagnostics are accumulated block by block as the forward pass makes the weights.
    std::vector<AttentionDiagnosticsAccumulator> accumulators;
    if (request.diagnostics) {
        const auto rule = attentionSparsityRule(request.run.attention, request.tauScale);
        for (int64_t l = 0; l < config.nLayers; ++l) {
            accumulators.emplace_back(config.nHeads, L, rule, model.device(), config.window(l));
        }
    }
    std::vector<PooledMap> overviews;
    if (request.overviewCells > 0 && L > request.overviewFromTokens) {
        for (int64_t l = 0; l < config.nLayers; ++l) {
            overviews.emplace_back(config.nHeads, 0, L, 0, L, request.overviewCells,
                                   request.overviewCells, Pooling::Max, model.device());
        }
    }
    if (!accumulators.empty() || !overviews.empty()) {
        trace.onAttentionBlock = [&](int64_t layer, int64_t rowOffset, const torch::Tensor& w) {
            if (!accumulators.empty()) accumulators[size_t(layer)].add(w[0], rowOffset);
            if (!overviews.empty()) overviews[size_t(layer)].add(w[0], rowOffset);
        };
    }
    if (cancel) trace.cancelled = [cancel] { return cancel->load(); };
    auto logits = model.forward(input, request.run, &trace);  // (1, L, V)
    if (!logits.defined() || (cancel && cancel->load())) return Error{"cancelled"};
    result.predictions = topPredictions(logits[0], request.topK, tokenizer);
    logits = torch::Tensor();

    std::vector<AttentionMaps::Layer> lazyLayers;
    std::vector<HeadMap> requested;
    for (int64_t l = 0; l < config.nLayers; ++l) {
        if (cancel && cancel->load()) return Error{"cancelled"};
        const auto& t = trace.layers[size_t(l)];
        LayerCapture layer;
        if (request.diagnostics) {
            layer.attention = accumulators[size_t(l)].finish(t.headOutputs[0]);
            layer.attention.rowSparsity = layer.attention.rowSparsity.to(torch::kCPU);
            layer.attention.rowEntropy = layer.attention.rowEntropy.to(torch::kCPU);
            layer.attention.rowMass = layer.attention.rowMass.to(torch::kCPU);
            layer.ffn = model.ffnDiagnostics(l, t.ffnInput[0], t.slotActivations[0],
                                             t.ffnOutput.defined() ? t.ffnOutput[0] : torch::Tensor(),
                                             request.run.ffn, request.tauScale);
            layer.ffn.tokenSparsity = layer.ffn.tokenSparsity.to(torch::kCPU);
        }
        if (request.slotActivations) layer.slotActivations = t.slotActivations[0].to(torch::kCPU);
        if (request.lazyMaps) {
            lazyLayers.push_back({t.q[0], t.k[0], model.attentionGamma(l), config.window(l)});
        }
        for (int64_t h = 0; h < config.nHeads; ++h) {
            bool wanted = request.allMaps;
            for (const auto& ref : request.maps) wanted |= (ref.layer == l && ref.head == h);
            if (!wanted) continue;
            HeadMap map{{l, h}, t.weights[0][h].to(torch::kCPU).contiguous(), {}};
            if (t.scores.defined()) map.scores = t.scores[0][h].to(torch::kCPU).contiguous();
            requested.push_back(std::move(map));
        }
        result.layers.push_back(std::move(layer));
    }
    std::vector<torch::Tensor> pooledOverviews;
    for (const auto& overview : overviews) pooledOverviews.push_back(overview.result());
    std::shared_ptr<const AttentionMaps> lazy;
    if (request.lazyMaps) {
        lazy = std::make_shared<const AttentionMaps>(std::move(lazyLayers), request.run.attention,
                                                     model.attentionScale());
    }
    result.maps = std::make_shared<const MapSource>(L, std::move(requested), std::move(lazy),
                                                    std::move(pooledOverviews));
    result.milliseconds =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    return result;
}

}  // namespace relulens::core
