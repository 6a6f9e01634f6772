#include "core/capture.h"

#include <algorithm>
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

namespace {

// Rows before the end from which a continuation can also start (see CaptureMemory).
constexpr int64_t kCheckpointRows = 16;

bool sameRequest(const CaptureRequest& a, const CaptureRequest& b) {
    return sameVariants(a.run, b.run) && a.lazyMaps == b.lazyMaps && a.effect == b.effect &&
           a.lens == b.lens && a.lensEveryPosition == b.lensEveryPosition &&
           a.slotActivations == b.slotActivations && a.diagnostics == b.diagnostics &&
           a.topK == b.topK && a.tauScale == b.tauScale && a.sinkThreshold == b.sinkThreshold &&
           a.blockRows == b.blockRows && a.overviewCells == b.overviewCells &&
           a.overviewFromTokens == b.overviewFromTokens;
}

// The checkpoint of `memory` a capture of `ids` can continue from, or null.
const CaptureMemory::Checkpoint* continuation(const CaptureMemory* memory,
                                              const LanguageModel& model,
                                              const CaptureRequest& request,
                                              const std::vector<int64_t>& ids) {
    if (!memory || memory->model != &model || !sameRequest(memory->request, request))
        return nullptr;
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

// Whether two requests ask the same of every layer (variants, maps, diagnostics, thresholds),
// whatever their overrides, effect, lens, top-k and slot activations (a memory keeps the slots
// either way).
bool sameLayerWork(const CaptureRequest& a, const CaptureRequest& b) {
    return a.run.attention == b.run.attention && a.run.ffn == b.run.ffn &&
           a.lazyMaps == b.lazyMaps && a.diagnostics == b.diagnostics && a.tauScale == b.tauScale &&
           a.sinkThreshold == b.sinkThreshold && a.blockRows == b.blockRows &&
           a.overviewCells == b.overviewCells && a.overviewFromTokens == b.overviewFromTokens;
}

// How many leading layers `memory`, a capture of the same tokens, computed exactly as this
// request would (every head of them runs the same attention): at most all but the last, so
// that the pass still ends in the logits; 0 when the memory lacks the stream entering the
// first layer to run.
int64_t reusableLayers(const CaptureMemory* memory, const LanguageModel& model,
                       const CaptureRequest& request, const std::vector<int64_t>& ids) {
    if (!memory || memory->model != &model || memory->ids != ids ||
        memory->atEnd.row != int64_t(ids.size()) || !sameLayerWork(memory->request, request)) {
        return 0;
    }
    const auto& info = model.info();
    int64_t k = 0;
    for (; k < info.nLayers - 1; ++k) {
        bool same = true;
        for (int64_t h = 0; h < info.nHeads && same; ++h) {
            same = memory->request.run.headAttention(k, h) == request.run.headAttention(k, h);
        }
        if (!same) break;
    }
    if (k == 0 || size_t(k) >= memory->residual.size() || !memory->residual[size_t(k)].defined())
        return 0;
    // One sparsity rule holds for the whole run (exact zeros only when every head has them), so
    // a change above that switches the rule changes what the layers below count.
    if (request.diagnostics &&
        attentionSparsityRule(memory->request.run, info.nLayers, info.nHeads, request.tauScale)
                .exactZero !=
            attentionSparsityRule(request.run, info.nLayers, info.nHeads, request.tauScale)
                .exactZero) {
        return 0;
    }
    if (request.diagnostics && memory->atEnd.accumulators.size() < size_t(k)) return 0;
    return k;
}

// What capture refuses before any work: empty, blank or non-UTF-8 text, a run the model cannot
// do, a map of a head the model lacks.
Status checkRequest(const LanguageModel& model, const std::string& text,
                    const CaptureRequest& request) {
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
    return {};
}

// The text's tokens, refused when there are none, more than the request allows, or ids past
// the model's vocabulary.
Result<std::vector<Token>> tokensFor(const ModelInfo& config, const Tokenizer& tokenizer,
                                     const std::string& text, const CaptureRequest& request) {
    auto encoded = tokenizer.encode(text);
    if (!encoded) return Error{encoded.error()};
    std::vector<Token> tokens = std::move(*encoded);
    if (tokens.empty()) return Error{"the text produced no tokens"};
    const auto L = int64_t(tokens.size());
    if (L > request.maxTokens) {
        return Error{"the text has " + std::to_string(L) + " tokens; at most " +
                     std::to_string(request.maxTokens) +
                     " can be inspected at once: shorten it or inspect an excerpt"};
    }
    if (request.allMaps && L > request.maxAllMapsTokens) {
        return Error{"the text has " + std::to_string(L) +
                     " tokens; every map at once is kept for at most " +
                     std::to_string(request.maxAllMapsTokens) +
                     " tokens: ask for single heads' maps instead"};
    }
    for (const auto& t : tokens) {
        if (t.id < 0 || t.id >= config.vocabSize) {
            return Error{"token id " + std::to_string(t.id) + " is outside the model's vocabulary"};
        }
    }
    return tokens;
}

// The positions the logit lens reads (every one, or those asked for), each inside the text.
Result<std::vector<int64_t>> lensPositionsFor(const CaptureRequest& request, int64_t L) {
    std::vector<int64_t> positions = request.lensPositions;
    if (request.lensEveryPosition) {
        positions.clear();
        for (int64_t p = 0; p < L; ++p) positions.push_back(p);
    }
    for (const int64_t p : positions) {
        if (p < -1 || p >= L) {
            return Error{"lens position " + std::to_string(p) + " is outside the text's " +
                         std::to_string(L) + " tokens (0–" + std::to_string(L - 1) + ")"};
        }
    }
    return positions;
}

// What the forward pass keeps for the request: only what its results are built from.
TraceOptions traceOptions(const CaptureRequest& request, bool anyMaps, bool continuable,
                          bool lens) {
    TraceOptions options;
    options.weights = anyMaps;
    options.scores = anyMaps && request.mapScores;
    options.headOutputs = request.diagnostics || continuable;
    options.queriesKeys = request.lazyMaps || continuable;
    // Sink diagnostics read the first token's key and value, and the residual stream.
    options.values = continuable || request.diagnostics;
    options.residual = request.diagnostics || lens || request.effect;
    options.ffn = request.diagnostics || request.slotActivations || continuable;
    return options;
}

// A layer's tensors over the whole text, whether this pass ran the layer or took it from below.
struct LayerTensors {
    torch::Tensor keys, values;  // (1, H_kv, L, dh)
    torch::Tensor headOutputs, ffnInput, slots, ffnOutput, residual;
};

// Layer l's diagnostics: attention (accumulated block by block in the pass, with its sinks),
// the residual stream and the feed-forward memory, on the CPU for the views.
LayerCapture layerDiagnostics(const LanguageModel& model, int64_t l, const CaptureRequest& request,
                              const AttentionDiagnosticsAccumulator& accumulator,
                              const LayerTensors& t) {
    LayerCapture layer;
    layer.attentionDiagnostics = accumulator.finish(t.headOutputs);
    layer.attentionDiagnostics.rowSparsity = layer.attentionDiagnostics.rowSparsity.to(torch::kCPU);
    layer.attentionDiagnostics.rowEntropy = layer.attentionDiagnostics.rowEntropy.to(torch::kCPU);
    layer.attentionDiagnostics.rowMass = layer.attentionDiagnostics.rowMass.to(torch::kCPU);
    completeSinkDiagnostics(layer.attentionDiagnostics.heads, t.keys[0], t.values[0],
                            request.sinkThreshold);
    layer.residual = residualDiagnostics(t.residual);
    layer.ffn = model.ffnDiagnostics(l, t.ffnInput, t.slots, t.ffnOutput, request.run.ffn,
                                     request.tauScale);
    layer.ffn.tokenSparsity = layer.ffn.tokenSparsity.to(torch::kCPU);
    return layer;
}

// The rows a memory keeps besides keys and values: where the pass traces them, where the memory
// keeps them, and the rows' dimension there (without the batch).
struct KeptRows {
    torch::Tensor LayerTrace::*traced;
    std::vector<GrowingRows> CaptureMemory::*kept;
    int64_t dim;
};
const KeptRows kKeptRows[] = {
    {&LayerTrace::q, &CaptureMemory::queries, 1},
    {&LayerTrace::headOutputs, &CaptureMemory::headOutputs, 1},
    {&LayerTrace::ffnInput, &CaptureMemory::ffnInput, 0},
    {&LayerTrace::slotActivations, &CaptureMemory::slotActivations, 0},
    {&LayerTrace::ffnOutput, &CaptureMemory::ffnOutput, 0},
    {&LayerTrace::residual, &CaptureMemory::residual, 0},
};

}  // namespace

bool CaptureMemory::canServe(const LanguageModel& m, const CaptureRequest& r) const {
    return model == &m && r.maps.empty() && !r.allMaps && sameLayerWork(request, r);
}

Result<CaptureResult> capture(const LanguageModel& model, const Tokenizer& tokenizer,
                              const std::string& text, const CaptureRequest& request,
                              const std::atomic<bool>* cancel, const CaptureMemory* previous,
                              std::shared_ptr<const CaptureMemory>* memoryOut) {
    const auto& config = model.info();
    if (auto s = checkRequest(model, text, request); !s) return Error{s.error()};
    const auto started = std::chrono::steady_clock::now();
    CaptureResult result;
    result.model = config;
    result.run = request.run;
    result.trainedWithRun = sameVariants(request.run, config.trained);
    result.tauScale = request.tauScale;
    result.sinkThreshold = request.sinkThreshold;
    result.device = model.device().str();
    auto tokens = tokensFor(config, tokenizer, text, request);
    if (!tokens) return Error{tokens.error()};
    result.tokens = std::move(*tokens);
    const auto L = int64_t(result.tokens.size());
    std::vector<int64_t> ids;
    for (const auto& t : result.tokens) ids.push_back(t.id);
    const bool anyMaps = request.allMaps || !request.maps.empty();
    const bool continuable = memoryOut && !anyMaps;
    const bool lens = request.lens && L <= request.lensMaxTokens;
    std::vector<int64_t> lensPositions;
    if (lens) {
        auto positions = lensPositionsFor(request, L);
        if (!positions) return Error{positions.error()};
        lensPositions = std::move(*positions);
    }
    // The effect and the lens read every row's logits and residual stream: no reuse.
    const bool everyRow = request.effect || lens;
    const CaptureMemory::Checkpoint* from =
        !anyMaps && !everyRow ? continuation(previous, model, request, ids) : nullptr;
    const CaptureMemory* past = from ? previous : nullptr;
    const int64_t P = from ? from->row : 0;  // tokens taken from the previous capture
    result.reusedTokens = P;
    // Or the same tokens with a change higher in the model: the layers below it are taken from
    // the previous capture and the pass starts above them.
    const int64_t K = from || anyMaps ? 0 : reusableLayers(previous, model, request, ids);
    const CaptureMemory* below = K > 0 ? previous : nullptr;
    result.reusedLayers = K;

    torch::NoGradGuard noGrad;
    std::vector<int64_t> newIds(ids.begin() + P, ids.end());
    auto input = torch::tensor(newIds, torch::kLong).view({1, L - P}).to(model.device());
    ForwardTrace trace;
    trace.options = traceOptions(request, anyMaps, continuable, lens);
    trace.blockRows = request.blockRows;
    // The rows a memory keeps are written by the pass as it makes them, into storage with room
    // for the words typed next: a continuation's after the previous capture's first P (in place
    // when they can, else in a copy), a capture from scratch's into new storage. So no copy is
    // needed later, and the pass's own tensors are freed layer by layer.
    const bool keepRows = continuable || past;
    const int64_t spare = roomAfter(L);
    std::vector<GrowingRows> grownKeys(size_t(config.nLayers)), grownValues(size_t(config.nLayers));
    CaptureMemory kept;  // per layer, the other rows the memory keeps
    if (keepRows) {
        const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(model.device());
        const std::vector<int64_t> sizes = {1, config.nKvHeads, L, config.headDim};
        for (int64_t l = 0; l < config.nLayers; ++l) {
            auto& keys = grownKeys[size_t(l)];
            auto& values = grownValues[size_t(l)];
            if (past) {
                keys = past->keys[size_t(l)].extended(P, L - P, spare);
                values = past->values[size_t(l)].extended(P, L - P, spare);
                trace.pastKeys.push_back(keys.tensor().narrow(2, 0, P));
                trace.pastValues.push_back(values.tensor().narrow(2, 0, P));
            } else if (l >= K) {
                keys = GrowingRows::allocated(sizes, 2, spare, options);
                values = GrowingRows::allocated(sizes, 2, spare, options);
            }
            trace.keyRoom.push_back(keys.tensor());
            trace.valueRoom.push_back(values.tensor());
        }
        for (const auto& k : kKeptRows) (kept.*k.kept).resize(size_t(config.nLayers));
        trace.keepRows = [&](int64_t l, torch::Tensor LayerTrace::*traced,
                             const torch::Tensor& fresh) {
            for (const auto& k : kKeptRows) {
                if (k.traced != traced) continue;
                auto& rows = (kept.*k.kept)[size_t(l)];
                const auto now = fresh[0];
                rows = past ? (past->*k.kept)[size_t(l)].extended(P, L - P, spare)
                            : GrowingRows::allocated(now.sizes(), k.dim, spare, now.options());
                auto place = rows.tensor().narrow(k.dim, P, L - P);
                place.copy_(now);
                return place.unsqueeze(0);
            }
            return fresh;
        };
    }
    if (below) {
        trace.startLayer = K;
        trace.startResidual = below->residual[size_t(K)].tensor().unsqueeze(0);
    }
    // Diagnostics are accumulated block by block as the forward pass makes the weights.
    std::vector<AttentionDiagnosticsAccumulator> accumulators;
    if (request.diagnostics) {
        const auto rule =
            attentionSparsityRule(request.run, config.nLayers, config.nHeads, request.tauScale);
        for (int64_t l = 0; l < config.nLayers; ++l) {
            if (from) {
                accumulators.push_back(from->accumulators[size_t(l)].resized(L));
            } else if (l < K) {
                accumulators.push_back(below->atEnd.accumulators[size_t(l)].resized(L));
            } else {
                accumulators.emplace_back(config.nHeads, L, rule, model.device(), config.window(l));
            }
        }
    }
    std::vector<PooledMap> overviews;
    if (request.overviewCells > 0 && L > request.overviewFromTokens) {
        for (int64_t l = 0; l < config.nLayers; ++l) {
            overviews.push_back(
                from ? from->overviews[size_t(l)].extended(L)
                : l < K
                    ? below->atEnd.overviews[size_t(l)].copy()
                    : PooledMap::overview(config.nHeads, L, request.overviewCells, model.device()));
        }
    }
    // A continuable capture keeps the running state both at the end and kCheckpointRows before
    // it, splitting the block that holds that row.
    CaptureMemory::Checkpoint checkpoint;
    checkpoint.row = std::max<int64_t>(P, L - kCheckpointRows);
    // (The checkpoint is made as the blocks pass, so none when some layers do not run.)
    const bool keepCheckpoint = continuable && checkpoint.row > 0 && checkpoint.row < L && !below;
    if (keepCheckpoint && checkpoint.row == P) {
        for (const auto& a : accumulators) checkpoint.accumulators.push_back(a.resized(L));
        for (const auto& o : overviews) checkpoint.overviews.push_back(o.copy());
    }
    if (!accumulators.empty() || !overviews.empty()) {
        // Called for two parts of the heads at once, possibly at different blocks of rows
        // (disjoint heads: see ForwardTrace).
        trace.onAttentionBlock = [&](int64_t layer, int64_t rowOffset, int64_t headBegin,
                                     const torch::Tensor& block) {
            const auto w = block[0];
            if (!accumulators.empty()) accumulators[size_t(layer)].add(w, rowOffset, headBegin);
            if (!overviews.empty()) overviews[size_t(layer)].add(w, rowOffset, headBegin);
        };
        if (keepCheckpoint && checkpoint.row > P) {
            trace.splitRow = checkpoint.row;
            trace.onSplitRow = [&](int64_t layer) {
                if (!accumulators.empty()) {
                    checkpoint.accumulators.push_back(accumulators[size_t(layer)].resized(L));
                }
                if (!overviews.empty()) {
                    checkpoint.overviews.push_back(overviews[size_t(layer)].copy());
                }
            };
        }
    }
    if (cancel) trace.cancelled = [cancel] { return cancel->load(); };
    // The effect compares every row's whole logits; without it only each row's top predictions
    // are kept, taken from the final stream a block of rows at a time.
    trace.stopBeforeLogits = !request.effect;
    auto logits = model.forward(input, request.run, &trace);  // (1, L - P, V), or (1, L - P, d)
    if (!logits.defined() || (cancel && cancel->load())) return Error{"cancelled"};
    if (past) {
        result.predictions.assign(past->predictions.begin(), past->predictions.begin() + P);
    }
    constexpr int64_t kPredictionRows = 1024;
    for (int64_t r0 = 0; r0 < L - P; r0 += kPredictionRows) {
        const auto rows = logits[0].narrow(0, r0, std::min(kPredictionRows, L - P - r0));
        for (auto& p :
             topPredictions(trace.stopBeforeLogits ? model.logitsFromResidual(rows) : rows,
                            request.topK, tokenizer)) {
            result.predictions.push_back(std::move(p));
        }
    }
    // The stream entering layer l (L, d), whether this pass ran it or took it from below.
    auto entering = [&](int64_t l) {
        return l < K ? below->residual[size_t(l)].tensor() : trace.layers[size_t(l)].residual[0];
    };
    if (request.effect) {
        // Without the overrides the run is the same below the first layer they name: start there.
        int64_t first = config.nLayers;
        for (const auto& o : request.run.overrides) first = std::min(first, o.layer);
        ForwardTrace unchangedTrace;
        if (first > 0 && first < config.nLayers) {
            unchangedTrace.startLayer = first;
            unchangedTrace.startResidual = entering(first).unsqueeze(0);
        }
        const auto unchanged =
            model.forward(input, request.run.withoutOverrides(), &unchangedTrace);
        result.effect = changeEffect(logits[0], unchanged[0], ids, request.topK, tokenizer);
    }
    logits = torch::Tensor();
    if (lens) {
        std::vector<torch::Tensor> afterLayer;
        for (int64_t l = 1; l < config.nLayers; ++l) afterLayer.push_back(entering(l));
        afterLayer.push_back(trace.finalResidual[0]);
        result.lens = logitLens(model, afterLayer, ids, lensPositions, request.topK, tokenizer);
    }

    std::shared_ptr<CaptureMemory> memory;
    if (continuable) memory = std::make_shared<CaptureMemory>();
    std::vector<AttentionMaps::Layer> lazyLayers;
    std::vector<HeadMap> requested;
    for (int64_t l = 0; l < config.nLayers; ++l) {
        if (cancel && cancel->load()) return Error{"cancelled"};
        const auto& t = trace.layers[size_t(l)];
        // A layer this pass ran (kept as the pass went, or traced), or one taken whole from the
        // capture below.
        auto layerRows = [&](const KeptRows& k) {
            if (l < K) return ((*below).*k.kept)[size_t(l)];
            if (keepRows) return (kept.*k.kept)[size_t(l)];
            const auto& fresh = t.*k.traced;
            return fresh.defined() ? GrowingRows(fresh[0], k.dim) : GrowingRows();
        };
        std::vector<GrowingRows> rows;  // in kKeptRows' order
        for (const auto& k : kKeptRows) rows.push_back(layerRows(k));
        auto rowsOf = [&](std::vector<GrowingRows> CaptureMemory::*kept) {
            for (size_t i = 0; i < rows.size(); ++i) {
                if (kKeptRows[i].kept == kept) return rows[i].tensor();
            }
            return torch::Tensor();
        };
        const auto q = rowsOf(&CaptureMemory::queries),
                   headOutputs = rowsOf(&CaptureMemory::headOutputs),
                   ffnInput = rowsOf(&CaptureMemory::ffnInput),
                   slots = rowsOf(&CaptureMemory::slotActivations),
                   ffnOutput = rowsOf(&CaptureMemory::ffnOutput),
                   residual = rowsOf(&CaptureMemory::residual);
        // (1, H_kv, L, dh), written in storage with room by the pass when the memory keeps them
        const auto keyRows = l < K      ? below->keys[size_t(l)]
                             : keepRows ? grownKeys[size_t(l)]
                                        : GrowingRows(t.k, 2);
        const auto valueRows = l < K      ? below->values[size_t(l)]
                               : keepRows ? grownValues[size_t(l)]
                                          : GrowingRows(t.v, 2);
        const auto keys = keyRows.tensor(), values = valueRows.tensor();
        LayerCapture layer;
        if (request.diagnostics) {
            layer =
                layerDiagnostics(model, l, request, accumulators[size_t(l)],
                                 {keys, values, headOutputs, ffnInput, slots, ffnOutput, residual});
        }
        if (request.slotActivations) layer.slotActivations = slots.to(torch::kCPU);
        if (request.lazyMaps) {
            lazyLayers.push_back({q, keys[0], model.attentionGamma(l), config.window(l)});
        }
        if (memory) {
            memory->keys.push_back(keyRows);
            memory->values.push_back(valueRows);
            for (size_t i = 0; i < rows.size(); ++i) {
                ((*memory).*kKeptRows[i].kept).push_back(rows[i]);
            }
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
