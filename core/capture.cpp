#include "core/capture.h"

#include <chrono>
#include <cmath>

#include <torch/csrc/autograd/grad_mode.h>

#include "core/lens.h"

namespace relulens::core {

bool sameVariants(const RunSpec& a, const RunSpec& b) {
    return a.attention == b.attention && a.ffn == b.ffn && a.overrides == b.overrides;
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

namespace {

// Rows before the end from which a continuation can also start (see CaptureMemory).
constexpr int64_t kCheckpointRows = 16;

bool sameRequest(const CaptureRequest& a, const CaptureRequest& b) {
    return sameVariants(a.run, b.run) && a.lazyMaps == b.lazyMaps && a.effect == b.effect &&
           a.lens == b.lens && a.lensEveryPosition == b.lensEveryPosition &&
           a.slotActivations == b.slotActivations && a.diagnostics == b.diagnostics &&
           a.topK == b.topK && a.tauScale == b.tauScale && a.sinkThreshold == b.sinkThreshold &&
           a.blockRows == b.blockRows &&
           a.overviewCells == b.overviewCells && a.overviewFromTokens == b.overviewFromTokens;
}

// The checkpoint of `memory` a capture of `ids` can continue from, or null.
const CaptureMemory::Checkpoint* continuation(const CaptureMemory* memory, const LanguageModel& model,
                                              const CaptureRequest& request,
                                              const std::vector<int64_t>& ids) {
    if (!memory || memory->model != &model || !sameRequest(memory->request, request)) return nullptr;
    const auto L = int64_t(ids.size());
    const bool overviews = request.overviewCells > 0 && L > request.overviewFromTokens;
    if (overviews != !memory->atEnd.overviews.empty()) return nullptr;  // (both past the threshold)
    const auto P = int64_t(memory->ids.size());
    int64_t shared = 0;
    while (shared < std::min(P, L) && ids[size_t(shared)] == memory->ids[size_t(shared)]) ++shared;
    for (const auto* c : {&memory->atEnd, &memory->beforeEnd}) {
        if (c->row > 0 && c->row <= shared && c->row < L) return c;
    }
    return nullptr;
}

}  // namespace

int64_t CaptureMemory::bytes() const {
    int64_t total = 0;
    for (const auto* list : {&keys, &values, &queries, &headOutputs, &ffnInput, &slotActivations, &ffnOutput,
                             &residual}) {
        for (const auto& t : *list) {
            if (t.defined()) total += t.numel() * int64_t(t.element_size());
        }
    }
    return total;
}

Result<CaptureResult> capture(const LanguageModel& model, const Tokenizer& tokenizer,
                              const std::string& text, const CaptureRequest& request,
                              const std::atomic<bool>* cancel, const CaptureMemory* previous,
                              std::shared_ptr<const CaptureMemory>* memoryOut) {
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
    result.sinkThreshold = request.sinkThreshold;
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
    const bool anyMaps = request.allMaps || !request.maps.empty();
    const bool continuable = memoryOut && !anyMaps;
    const bool lens = request.lens && L <= request.lensMaxTokens;
    std::vector<int64_t> lensPositions = request.lensPositions;
    if (request.lensEveryPosition) {
        lensPositions.clear();
        for (int64_t p = 0; p < L; ++p) lensPositions.push_back(p);
    }
    for (const int64_t p : lens ? lensPositions : std::vector<int64_t>{}) {
        if (p < -1 || p >= L) {
            return Error{"lens position " + std::to_string(p) + " is outside the text's " +
                         std::to_string(L) + " tokens (0–" + std::to_string(L - 1) + ")"};
        }
    }
    // The effect and the lens read every row's logits and residual stream: no reuse.
    const bool everyRow = request.effect || lens;
    const CaptureMemory::Checkpoint* from =
        !anyMaps && !everyRow ? continuation(previous, model, request, ids) : nullptr;
    const CaptureMemory* past = from ? previous : nullptr;
    const int64_t P = from ? from->row : 0;  // tokens taken from the previous capture
    result.reusedTokens = P;

    torch::NoGradGuard noGrad;
    std::vector<int64_t> newIds(ids.begin() + P, ids.end());
    auto input = torch::tensor(newIds, torch::kLong).view({1, L - P}).to(model.device());
    ForwardTrace trace;
    trace.options.weights = anyMaps;
    trace.options.scores = anyMaps && request.mapScores;
    trace.options.headOutputs = request.diagnostics || continuable;
    trace.options.queriesKeys = request.lazyMaps || continuable;
    // Sink diagnostics read the first token's key and value, and the residual stream.
    trace.options.values = continuable || request.diagnostics;
    trace.options.residual = request.diagnostics || lens;
    trace.blockRows = request.blockRows;
    trace.options.ffn = request.diagnostics || request.slotActivations || continuable;
    if (past) {
        for (int64_t l = 0; l < config.nLayers; ++l) {
            trace.pastKeys.push_back(past->keys[size_t(l)].narrow(2, 0, P));
            trace.pastValues.push_back(past->values[size_t(l)].narrow(2, 0, P));
        }
    }
    // Diagnostics are accumulated block by block as the forward pass makes the weights.
    std::vector<AttentionDiagnosticsAccumulator> accumulators;
    if (request.diagnostics) {
        const auto rule = attentionSparsityRule(request.run, config.nLayers, config.nHeads, request.tauScale);
        for (int64_t l = 0; l < config.nLayers; ++l) {
            if (from) {
                accumulators.push_back(from->accumulators[size_t(l)].resized(L));
            } else {
                accumulators.emplace_back(config.nHeads, L, rule, model.device(), config.window(l));
            }
        }
    }
    std::vector<PooledMap> overviews;
    if (request.overviewCells > 0 && L > request.overviewFromTokens) {
        for (int64_t l = 0; l < config.nLayers; ++l) {
            overviews.push_back(from ? from->overviews[size_t(l)].extended(L)
                                     : PooledMap::overview(config.nHeads, L, request.overviewCells,
                                                           model.device()));
        }
    }
    // A continuable capture keeps the running state both at the end and kCheckpointRows before
    // it, splitting the block that holds that row.
    CaptureMemory::Checkpoint checkpoint;
    checkpoint.row = std::max<int64_t>(P, L - kCheckpointRows);
    const bool keepCheckpoint = continuable && checkpoint.row > 0 && checkpoint.row < L;
    if (keepCheckpoint && checkpoint.row == P) {
        for (const auto& a : accumulators) checkpoint.accumulators.push_back(a.resized(L));
        for (const auto& o : overviews) checkpoint.overviews.push_back(o.copy());
    }
    auto addBlock = [&](int64_t layer, int64_t rowOffset, const torch::Tensor& w) {
        if (!accumulators.empty()) accumulators[size_t(layer)].add(w, rowOffset);
        if (!overviews.empty()) overviews[size_t(layer)].add(w, rowOffset);
    };
    if (!accumulators.empty() || !overviews.empty()) {
        trace.onAttentionBlock = [&](int64_t layer, int64_t rowOffset, const torch::Tensor& block) {
            const auto w = block[0];
            const int64_t R = w.size(1), split = checkpoint.row - rowOffset;
            if (!keepCheckpoint || checkpoint.row == P || split < 0 || split >= R) {
                addBlock(layer, rowOffset, w);
                return;
            }
            if (split > 0) addBlock(layer, rowOffset, w.narrow(1, 0, split));
            if (!accumulators.empty()) {
                checkpoint.accumulators.push_back(accumulators[size_t(layer)].resized(L));
            }
            if (!overviews.empty()) checkpoint.overviews.push_back(overviews[size_t(layer)].copy());
            addBlock(layer, checkpoint.row, w.narrow(1, split, R - split));
        };
    }
    if (cancel) trace.cancelled = [cancel] { return cancel->load(); };
    auto logits = model.forward(input, request.run, &trace);  // (1, L - P, V)
    if (!logits.defined() || (cancel && cancel->load())) return Error{"cancelled"};
    if (past) {
        result.predictions.assign(past->predictions.begin(), past->predictions.begin() + P);
    }
    for (auto& p : topPredictions(logits[0], request.topK, tokenizer)) {
        result.predictions.push_back(std::move(p));
    }
    if (request.effect) {
        const auto unchanged = model.forward(input, request.run.withoutOverrides());
        result.effect = changeEffect(logits[0], unchanged[0], ids, request.topK, tokenizer);
    }
    logits = torch::Tensor();
    if (lens) {
        std::vector<torch::Tensor> afterLayer;
        for (int64_t l = 1; l < config.nLayers; ++l) afterLayer.push_back(trace.layers[size_t(l)].residual[0]);
        afterLayer.push_back(trace.finalResidual[0]);
        result.lens = logitLens(model, afterLayer, ids, lensPositions, request.topK, tokenizer);
    }

    // Layer tensors of the new rows, preceded by the previous capture's first P rows.
    auto joined = [&](const std::vector<torch::Tensor> CaptureMemory::*list, int64_t l,
                      const torch::Tensor& fresh, int64_t dim) {
        if (!past || !fresh.defined()) return fresh;
        return torch::cat({((*past).*list)[size_t(l)].narrow(dim, 0, P), fresh}, dim);
    };
    std::shared_ptr<CaptureMemory> memory;
    if (continuable) memory = std::make_shared<CaptureMemory>();
    std::vector<AttentionMaps::Layer> lazyLayers;
    std::vector<HeadMap> requested;
    for (int64_t l = 0; l < config.nLayers; ++l) {
        if (cancel && cancel->load()) return Error{"cancelled"};
        const auto& t = trace.layers[size_t(l)];
        const auto q = t.q.defined() ? joined(&CaptureMemory::queries, l, t.q[0], 1) : torch::Tensor();
        const auto headOutputs =
            t.headOutputs.defined() ? joined(&CaptureMemory::headOutputs, l, t.headOutputs[0], 1) : torch::Tensor();
        const auto ffnInput = t.ffnInput.defined() ? joined(&CaptureMemory::ffnInput, l, t.ffnInput[0], 0) : torch::Tensor();
        const auto slots =
            t.slotActivations.defined() ? joined(&CaptureMemory::slotActivations, l, t.slotActivations[0], 0) : torch::Tensor();
        const auto ffnOutput = t.ffnOutput.defined() ? joined(&CaptureMemory::ffnOutput, l, t.ffnOutput[0], 0) : torch::Tensor();
        const auto residual = t.residual.defined() ? joined(&CaptureMemory::residual, l, t.residual[0], 0) : torch::Tensor();
        LayerCapture layer;
        if (request.diagnostics) {
            layer.attention = accumulators[size_t(l)].finish(headOutputs);
            layer.attention.rowSparsity = layer.attention.rowSparsity.to(torch::kCPU);
            layer.attention.rowEntropy = layer.attention.rowEntropy.to(torch::kCPU);
            layer.attention.rowMass = layer.attention.rowMass.to(torch::kCPU);
            completeSinkDiagnostics(layer.attention.heads, t.k[0], t.v[0], request.sinkThreshold);
            layer.residual = residualDiagnostics(residual);
            layer.ffn = model.ffnDiagnostics(l, ffnInput, slots, ffnOutput, request.run.ffn,
                                             request.tauScale);
            layer.ffn.tokenSparsity = layer.ffn.tokenSparsity.to(torch::kCPU);
        }
        if (request.slotActivations) layer.slotActivations = slots.to(torch::kCPU);
        if (request.lazyMaps) {
            lazyLayers.push_back({q, t.k[0], model.attentionGamma(l), config.window(l)});
        }
        if (memory) {
            memory->keys.push_back(t.k);
            memory->values.push_back(t.v);
            memory->queries.push_back(q);
            memory->headOutputs.push_back(headOutputs);
            memory->ffnInput.push_back(ffnInput);
            memory->slotActivations.push_back(slots);
            memory->ffnOutput.push_back(ffnOutput);
            memory->residual.push_back(residual);
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
        lazy = std::make_shared<const AttentionMaps>(std::move(lazyLayers), request.run,
                                                     model.attentionScale());
    }
    result.maps = std::make_shared<const MapSource>(L, std::move(requested), std::move(lazy),
                                                    std::move(pooledOverviews));
    if (memory) {
        memory->model = &model;
        memory->request = request;
        memory->ids = ids;
        memory->predictions = result.predictions;
        memory->atEnd.row = L;
        memory->atEnd.accumulators = std::move(accumulators);
        memory->atEnd.overviews = std::move(overviews);
        if (keepCheckpoint) memory->beforeEnd = std::move(checkpoint);
        *memoryOut = std::move(memory);
    }
    result.milliseconds =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    return result;
}

}  // namespace relulens::core
