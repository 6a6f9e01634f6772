// Lazy capture against the full one: maps rebuilt from queries and keys, diagnostics accumulated
// over blocks of rows, and pooled (level-of-detail) maps against pooling done by hand.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/attention.h"
#include "core/attention_maps.h"
#include "core/capture.h"
#include "core/checkpoint.h"
#include "core/cpu_kernels.h"
#include "core/fused_attention.h"
#include "core/predictions.h"
#include "core/second_core.h"
#include "core_test.h"

using namespace relulens::core;

namespace {

std::vector<RunSpec> everyVariant() {
    std::vector<RunSpec> runs;
    auto add = [&](AttentionKind kind, FamilyFunction h = FamilyFunction::Relu, double a = 1.0,
                   FfnKind ffn = FfnKind::Relu) {
        RunSpec run;
        run.attention.kind = kind;
        run.attention.familyFunction = h;
        run.attention.lengthExponent = a;
        run.ffn = ffn;
        runs.push_back(run);
    };
    add(AttentionKind::Softmax);
    add(AttentionKind::Relu);
    add(AttentionKind::ReluLen);
    add(AttentionKind::ReluLen, FamilyFunction::Relu, 0.5);
    add(AttentionKind::ReluFormer);
    add(AttentionKind::Family, FamilyFunction::Relu2, 1.5);
    add(AttentionKind::Family, FamilyFunction::Gelu, 1.0, FfnKind::Gelu);
    add(AttentionKind::Family, FamilyFunction::Softplus, 1.0, FfnKind::Softmax);
    add(AttentionKind::Family, FamilyFunction::Sigmoid, 0.0, FfnKind::SoftmaxLn);
    for (auto kind : {AttentionKind::Sigmoid, AttentionKind::Softpick, AttentionKind::Softmax1,
                      AttentionKind::Sparsemax, AttentionKind::Entmax15, AttentionKind::Ssmax,
                      AttentionKind::StickBreaking}) {
        add(kind);
    }
    // Per-layer and per-head overrides and ablations, at each layer of the tiny model (2 layers
    // of 2 heads).
    RunSpec layer0 = runs[0], mixed = runs[0], ablated = runs[2];
    layer0.overrides = {*parseOverride("0=relu_len")};
    mixed.overrides = {*parseOverride("1=reluformer"), *parseOverride("1:0=sparsemax"),
                       *parseAblation("0:1=uniform")};
    ablated.overrides = {*parseAblation("1:1"), *parseOverride("0:0=softmax")};
    runs.insert(runs.end(), {layer0, mixed, ablated});
    return runs;
}

double maxDifference(const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// Difference relative to the size of the values (raw ReLU row masses reach the hundreds).
double relativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
    return maxDifference(a, b) / (1.0 + a.to(torch::kFloat64).abs().max().item<double>());
}

bool close(double a, double b, double tolerance) {
    return std::abs(a - b) <= tolerance * (1.0 + std::abs(a));
}

// One head's summary from two captures that must agree: sparsity, mass, entropy, top-1 %
// share, output variance, empty rows and the distance profile.
void requireSameHeadSummary(const HeadDiagnostics& p, const HeadDiagnostics& q,
                            const std::string& name) {
    REQUIRE_MESSAGE(std::abs(p.sparsity - q.sparsity) < 1e-6, name);
    REQUIRE_MESSAGE(close(p.rowMass, q.rowMass, 1e-5), name);
    REQUIRE_MESSAGE(close(p.entropy, q.entropy, 1e-4), name);
    REQUIRE_MESSAGE(std::abs(p.topOnePercentShare - q.topOnePercentShare) < 1e-5, name);
    REQUIRE_MESSAGE(close(p.outputVariance, q.outputVariance, 1e-5), name);
    REQUIRE(p.emptyRows == q.emptyRows);
    REQUIRE(p.distanceProfile.size() == q.distanceProfile.size());
    for (size_t d = 0; d < p.distanceProfile.size(); ++d) {
        REQUIRE_MESSAGE(close(p.distanceProfile[d], q.distanceProfile[d], 1e-5), name);
    }
}

std::string readText(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Pooling by hand: loops over the cells of the (rows × keys) region of a full map.
torch::Tensor poolByHand(const torch::Tensor& full, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
                         int64_t outRows, int64_t outKeys, bool max) {
    auto out = torch::empty({outRows, outKeys}, torch::kFloat32);
    for (int64_t a = 0; a < outRows; ++a) {
        for (int64_t b = 0; b < outKeys; ++b) {
            const int64_t rLo = r0 + a * (r1 - r0) / outRows,
                          rHi = r0 + (a + 1) * (r1 - r0) / outRows;
            const int64_t kLo = k0 + b * (k1 - k0) / outKeys,
                          kHi = k0 + (b + 1) * (k1 - k0) / outKeys;
            double best = -std::numeric_limits<double>::infinity(), sum = 0;
            int count = 0;
            for (int64_t i = rLo; i < rHi; ++i) {
                for (int64_t j = kLo; j < kHi; ++j) {
                    if (j > i) continue;  // masked: not data
                    const double v = full[i][j].item<double>();
                    best = std::max(best, v);
                    sum += v;
                    ++count;
                }
            }
            out[a][b] = count == 0 ? std::numeric_limits<float>::quiet_NaN()
                                   : float(max ? best : sum / count);
        }
    }
    return out;
}

// Max-pooling by hand into cells of w × w tokens from the top left (the last ones narrower).
torch::Tensor poolUniformByHand(const torch::Tensor& full, int64_t w) {
    const int64_t L = full.size(0), cells = (L + w - 1) / w;
    auto out = torch::empty({cells, cells});
    for (int64_t a = 0; a < cells; ++a) {
        for (int64_t b = 0; b < cells; ++b) {
            double best = std::numeric_limits<double>::quiet_NaN();
            for (int64_t i = a * w; i < std::min(L, a * w + w); ++i) {
                for (int64_t j = b * w; j < std::min(L, b * w + w) && j <= i; ++j) {
                    const double v = full[i][j].item<double>();
                    if (std::isnan(best) || v > best) best = v;
                }
            }
            out[a][b] = float(best);
        }
    }
    return out;
}

bool sameWithNaN(const torch::Tensor& a, const torch::Tensor& b, double tolerance) {
    if (a.sizes() != b.sizes()) return false;
    if (!torch::equal(a.isnan(), b.isnan())) return false;
    const auto finite = a.isnan().logical_not();
    if (finite.sum().item<int64_t>() == 0) return true;
    return (a.masked_select(finite) - b.masked_select(finite)).abs().max().item<double>() <=
           tolerance;
}

// b against a capture a of the same text (or, prefixOnly, of a longer text starting with it).
void compareCaptures(const CaptureResult& a, const CaptureResult& b, const std::string& name,
                     bool prefixOnly = false) {
    const int64_t L = int64_t(b.tokens.size());
    if (!prefixOnly) REQUIRE(int64_t(a.tokens.size()) == L);
    for (int64_t i = 0; i < L - (prefixOnly ? 1 : 0); ++i) {
        REQUIRE(a.tokens[size_t(i)].id == b.tokens[size_t(i)].id);
    }
    const int64_t rows = prefixOnly ? L - 2 : L;  // the last piece may differ in the prefix
    for (int64_t i = 0; i < rows; ++i) {
        const auto& p = a.predictions[size_t(i)];
        const auto& q = b.predictions[size_t(i)];
        REQUIRE(p.size() == q.size());
        for (size_t k = 0; k < p.size(); ++k) {
            REQUIRE_MESSAGE(std::abs(p[k].probability - q[k].probability) < 1e-5, name);
        }
        REQUIRE(p[0].id == q[0].id);
    }
    for (size_t l = 0; l < a.layers.size(); ++l) {
        const auto& x = a.layers[l];
        const auto& y = b.layers[l];
        auto head = [&](const torch::Tensor& t) { return t.narrow(-1, 0, rows); };
        REQUIRE_MESSAGE(maxDifference(head(x.attentionDiagnostics.rowSparsity),
                                      head(y.attentionDiagnostics.rowSparsity)) < 1e-6,
                        name << ", layer " << l << ": row sparsity "
                             << maxDifference(head(x.attentionDiagnostics.rowSparsity),
                                              head(y.attentionDiagnostics.rowSparsity))
                             << " apart");
        REQUIRE_MESSAGE(relativeDifference(head(x.attentionDiagnostics.rowEntropy),
                                           head(y.attentionDiagnostics.rowEntropy)) < 1e-4,
                        name);
        REQUIRE_MESSAGE(relativeDifference(head(x.attentionDiagnostics.rowMass),
                                           head(y.attentionDiagnostics.rowMass)) < 1e-5,
                        name);
        REQUIRE_MESSAGE(relativeDifference(x.slotActivations.narrow(0, 0, rows),
                                           y.slotActivations.narrow(0, 0, rows)) < 1e-5,
                        name);
        const auto maps = b.maps->lazy();
        REQUIRE(maps);
        for (int64_t h = 0; h < maps->heads(); h += 3) {
            REQUIRE_MESSAGE(maxDifference(a.maps->weights(int64_t(l), h, 0, rows, 0, rows),
                                          b.maps->weights(int64_t(l), h, 0, rows, 0, rows)) < 1e-5,
                            name);
        }
        if (prefixOnly) continue;
        REQUIRE_MESSAGE(relativeDifference(x.ffn.tokenSparsity, y.ffn.tokenSparsity) < 1e-6, name);
        REQUIRE_MESSAGE(close(x.ffn.sparsity, y.ffn.sparsity, 1e-6), name);
        REQUIRE_MESSAGE(close(x.ffn.outputVariance, y.ffn.outputVariance, 1e-5), name);
        // Blocks of other widths sum a row in another order (softmax1's e^s / (1 + Σ e^s) by
        // up to 3.5e-6 of a weight of 0.38), as the figures above are compared at 1e-5.
        const auto overview = a.maps->overview(int64_t(l));
        const double largest = overview.nan_to_num(0).abs().max().item<double>();
        REQUIRE(sameWithNaN(overview, b.maps->overview(int64_t(l)), 1e-5 * std::max(1.0, largest)));
        REQUIRE(x.attentionDiagnostics.outputVarianceByN.size() ==
                y.attentionDiagnostics.outputVarianceByN.size());
        for (size_t h = 0; h < x.attentionDiagnostics.heads.size(); ++h) {
            const auto& p = x.attentionDiagnostics.heads[h];
            const auto& q = y.attentionDiagnostics.heads[h];
            requireSameHeadSummary(p, q, name);
            REQUIRE_MESSAGE(std::abs(p.sink.firstTokenShare - q.sink.firstTokenShare) < 1e-5, name);
            REQUIRE_MESSAGE(std::abs(p.sink.sinkScore - q.sink.sinkScore) < 1e-5, name);
            REQUIRE(p.sink.sinkHead == q.sink.sinkHead);
            REQUIRE_MESSAGE(close(p.sink.firstKeyNorm, q.sink.firstKeyNorm, 1e-5), name);
            REQUIRE_MESSAGE(close(p.sink.otherValueNorm, q.sink.otherValueNorm, 1e-5), name);
        }
        REQUIRE_MESSAGE(close(x.residual.medianAbs, y.residual.medianAbs, 1e-5), name);
        REQUIRE_MESSAGE(close(x.residual.kurtosis, y.residual.kurtosis, 1e-4), name);
        REQUIRE(x.residual.largest[0].token == y.residual.largest[0].token);
        REQUIRE(x.residual.largest[0].dimension == y.residual.largest[0].dimension);
    }
}

LoadedModel loadFolder(const std::string& folder) {
    auto loaded = loadModelFolder(folder);
    if (!loaded.ok()) throw std::runtime_error(folder + ": " + loaded.error());
    return std::move(*loaded);
}

LoadedModel loadTiny() {
    return loadFolder(relulens::test::dataPath("tiny"));
}

// The bundled softmax model (four layers), loaded on first use.
const LoadedModel& bundledSoftmax() {
    static const LoadedModel model =
        loadFolder(std::string(RELULENS_RESOURCES) + "/models/softmax");
    return model;
}

// Loaded once, on first use (initTestCase): the tiny model and the text every capture reads.
struct Fixture {
    LoadedModel tiny = loadTiny();
    std::string text = readText(relulens::test::dataPath("excerpt.txt")).substr(0, 600);
};

const Fixture& fixture() {
    static Fixture f;
    return f;
}

// What the window asks for under `run`, with a small overview from the first token and blocks
// of `blockRows` rows (an odd size, so that block edges fall inside the rows continued).
CaptureRequest continuedRequest(const RunSpec& run, int64_t blockRows) {
    CaptureRequest request = viewerRequest(run, 0.1);
    request.overviewCells = 16;
    request.overviewFromTokens = 0;
    request.blockRows = blockRows;
    return request;
}

}  // namespace

TEST_CASE("inPlaceMaskingEqualsTheGeneralPath") {
    // Without autograd the causal boundary is masked in place on the last square of keys;
    // with it, through a full mask. Both must give the same weights for every variant.
    for (const auto& run : everyVariant()) {
        for (int64_t offset : {0, 5}) {
            auto scores = torch::randn({3, 4, offset + 4});
            const auto gamma = torch::rand({3}) + 0.5;
            torch::Tensor fast;
            {
                torch::NoGradGuard noGrad;
                fast = attentionWeights(scores.clone(), run.attention, gamma, offset, true);
            }
            auto tracked = scores.clone().set_requires_grad(true);
            auto general = attentionWeights(tracked, run.attention, gamma, offset).detach();
            REQUIRE_MESSAGE(maxDifference(fast, general) < 1e-6, run.attention.label().c_str());
            REQUIRE(fast.narrow(-1, offset, 4).triu(1).abs().sum().item<double>() == 0);
        }
    }
}

TEST_CASE("blockedForwardEqualsOneBlock") {
    const Fixture& fx = fixture();
    torch::NoGradGuard noGrad;
    auto ids = torch::randint(0, fx.tiny.model->info().vocabSize, {2, 50}, torch::kLong);
    for (const auto& run : everyVariant()) {
        ForwardTrace oneBlock;  // row mass: the blocked path, with all 50 rows in one block
        oneBlock.options.rowMass = true;
        auto whole = fx.tiny.model->forward(ids, run, &oneBlock);
        ForwardTrace blocked;
        blocked.blockRows = 7;  // 50 rows: 7 blocks of 7 and one of 1
        // Every (layer, block, head) handed over once, whether the heads come in one part or
        // two (two threads at once: counted under a lock).
        std::mutex lock;
        std::map<std::tuple<int64_t, int64_t, int64_t>, int> handed;
        blocked.onAttentionBlock = [&](int64_t layer, int64_t row, int64_t h0,
                                       const torch::Tensor& w) {
            std::lock_guard<std::mutex> hold(lock);
            for (int64_t h = h0; h < h0 + w.size(1); ++h) ++handed[{layer, row, h}];
        };
        auto pieces = fx.tiny.model->forward(ids, run, &blocked);
        const auto& info = fx.tiny.model->info();
        REQUIRE(handed.size() == size_t(8 * info.nLayers * info.nHeads));
        for (const auto& [key, times] : handed) REQUIRE(times == 1);
        REQUIRE_MESSAGE(maxDifference(whole, pieces) < 1e-4, run.attention.label().c_str());
    }
}

TEST_CASE("aForwardWithoutMapsEqualsTheBlockedOneOverManyTiles") {
    // 700 tokens: a pass that keeps nothing takes the fused kernel where the variant allows
    // (tiles of 64 rows and 512 keys); one that keeps row mass takes the blocked path.
    const Fixture& fx = fixture();
    torch::NoGradGuard noGrad;
    auto ids = torch::randint(0, fx.tiny.model->info().vocabSize, {1, 700}, torch::kLong);
    const int64_t layers = fx.tiny.model->info().nLayers;
    const auto runs = everyVariant();
    for (size_t r = 0; r < runs.size(); ++r) {
        const RunSpec& run = runs[r];
        CAPTURE(run.attention.label());
        CAPTURE(r);
        const int64_t before = fusedAttentionLayers();
        const auto fused = fx.tiny.model->forward(ids, run);
        const int64_t fusedLayers = fusedAttentionLayers() - before;
        ForwardTrace blocked;
        blocked.options.rowMass = true;
        const auto reference = fx.tiny.model->forward(ids, run, &blocked);
        REQUIRE(fusedAttentionLayers() - before == fusedLayers);  // the reference: none
        REQUIRE(maxDifference(fused, reference) < 1e-5 * reference.abs().max().item<double>());
        // Which layers took the kernel: every one for softmax, relu, relu_len (twice),
        // reluformer and family relu² (everyVariant's first six), none for the other variants,
        // and of the three runs with overrides (everyVariant's last three) only layer 1 of the
        // first (the others override or ablate something in both layers).
        REQUIRE(runs.size() == 19);
        if (!avx2KernelsRun()) {
            REQUIRE(fusedLayers == 0);
        } else if (r >= 16) {
            REQUIRE(fusedLayers == (r == 16 ? 1 : 0));
        } else {
            REQUIRE(fusedLayers == (r < 6 ? layers : 0));
        }
    }
}

TEST_CASE("aSplitRowInsideThePassKeepsTheBlockedPathAndOneOutsideItDoesNot") {
    // The window's captures split a pass at the row where a reused checkpoint is written
    // (onSplitRow): the blocked path stops there; a split outside the rows changes nothing.
    const Fixture& fx = fixture();
    torch::NoGradGuard noGrad;
    auto ids = torch::randint(0, fx.tiny.model->info().vocabSize, {1, 300}, torch::kLong);
    const int64_t layers = fx.tiny.model->info().nLayers;
    const auto plain = fx.tiny.model->forward(ids, everyVariant()[0]);
    for (const int64_t split : {int64_t(150), int64_t(0), int64_t(300)}) {
        CAPTURE(split);
        ForwardTrace trace;
        trace.splitRow = split;
        std::vector<int64_t> called;
        trace.onSplitRow = [&](int64_t layer) { called.push_back(layer); };
        const int64_t before = fusedAttentionLayers();
        const auto logits = fx.tiny.model->forward(ids, everyVariant()[0], &trace);
        const int64_t fusedLayers = fusedAttentionLayers() - before;
        REQUIRE(maxDifference(logits, plain) < 1e-5 * plain.abs().max().item<double>());
        if (split == 150) {
            REQUIRE(fusedLayers == 0);
            std::vector<int64_t> everyLayer(size_t(layers), 0);
            for (int64_t l = 0; l < layers; ++l) everyLayer[size_t(l)] = l;
            REQUIRE(called == everyLayer);
        } else {
            REQUIRE(fusedLayers == (avx2KernelsRun() ? layers : 0));
            REQUIRE(called.empty());
        }
    }
}

TEST_CASE("aCancelledPassStopsWithinABlockOfEachPart") {
    const Fixture& fx = fixture();
    torch::NoGradGuard noGrad;
    auto ids = torch::randint(0, fx.tiny.model->info().vocabSize, {1, 50}, torch::kLong);
    const int64_t heads = fx.tiny.model->info().nHeads;
    for (const bool cancel : {true, false}) {
        CAPTURE(cancel);
        ForwardTrace trace;
        trace.blockRows = 7;  // blocks at rows 0, 7, 14, then 20 (the split), 27, ... 48
        trace.splitRow = 20;
        std::mutex lock;
        std::map<int64_t, int> headsOfLayer;                  // heads handed, by layer
        std::map<std::pair<int64_t, bool>, int> beforeSplit;  // (layer, row < 20) -> heads
        trace.onAttentionBlock = [&](int64_t layer, int64_t row, int64_t, const torch::Tensor& w) {
            std::lock_guard<std::mutex> hold(lock);
            headsOfLayer[layer] += int(w.size(1));
            beforeSplit[{layer, row < 20}] += int(w.size(1));
        };
        // Called on this thread once every row before the split is in, and none after it.
        std::vector<int64_t> splitLayers;
        const auto caller = std::this_thread::get_id();
        trace.onSplitRow = [&](int64_t layer) {
            std::lock_guard<std::mutex> hold(lock);
            REQUIRE(std::this_thread::get_id() == caller);
            REQUIRE(beforeSplit[{layer, true}] == 3 * heads);
            REQUIRE(beforeSplit[{layer, false}] == 0);
            splitLayers.push_back(layer);
        };
        // The person cancels once blocks of three heads or more of the first layer are in.
        trace.cancelled = [&] {
            std::lock_guard<std::mutex> hold(lock);
            return cancel && headsOfLayer[0] >= 3;
        };
        const auto logits = fx.tiny.model->forward(ids, everyVariant()[0], &trace);
        if (!cancel) {
            REQUIRE(logits.defined());
            REQUIRE(splitLayers.size() == size_t(fx.tiny.model->info().nLayers));
            continue;
        }
        REQUIRE_FALSE(logits.defined());
        // Each part (or the one part) notices at its next block: from the 2 heads or fewer
        // handed when the count crossed 3, each of two parts adds at most one block of half the
        // heads (or the one part one block of all of them). The split row is never reached, and
        // no later layer starts.
        REQUIRE(headsOfLayer[0] >= 3);
        REQUIRE(headsOfLayer[0] <= 2 + heads);
        REQUIRE(splitLayers.empty());
        for (const auto& [layer, handed] : headsOfLayer) REQUIRE_MESSAGE(layer == 0, handed);
    }
}

TEST_CASE("lazyAndFullCaptureAgreeOnEveryVariant") {
    const Fixture& fx = fixture();
    for (const auto& run : everyVariant()) {
        const std::string name = run.attention.label();
        CaptureRequest full;
        full.run = run;
        full.allMaps = true;
        auto a = capture(*fx.tiny.model, fx.tiny.tokenizer, fx.text, full);
        REQUIRE_MESSAGE(a.ok(), (a ? "" : a.error().c_str()));
        CaptureRequest lazy;
        lazy.run = run;
        lazy.lazyMaps = true;
        lazy.blockRows = 13;  // diagnostics accumulated over many blocks of rows
        auto b = capture(*fx.tiny.model, fx.tiny.tokenizer, fx.text, lazy);
        REQUIRE_MESSAGE(b.ok(), (b ? "" : b.error().c_str()));
        REQUIRE(b->maps->requested().empty());
        REQUIRE(b->maps->lazy());
        const auto& maps = *b->maps->lazy();
        const int64_t L = int64_t(a->tokens.size());
        REQUIRE(L > 100);
        REQUIRE(maps.tokens() == L);
        for (const auto& m : a->maps->requested()) {
            const auto w = maps.weights(m.ref.layer, m.ref.head);
            REQUIRE_MESSAGE(maxDifference(w, m.weights) < 1e-5,
                            name << " " << maxDifference(w, m.weights));
            const auto s = maps.scores(m.ref.layer, m.ref.head, 0, L, 0, L);
            REQUIRE_MESSAGE(relativeDifference(s, m.scores) < 1e-5, name);
            // a tile is the same slice of the map
            const auto tile = maps.weights(m.ref.layer, m.ref.head, 40, 77, 10, 61);
            REQUIRE_MESSAGE(maxDifference(tile, m.weights.slice(0, 40, 77).slice(1, 10, 61)) < 1e-5,
                            name);
        }
        // the mean of a layer's heads
        std::vector<torch::Tensor> layer1;
        for (const auto& m : a->maps->requested()) {
            if (m.ref.layer == 1) layer1.push_back(m.weights);
        }
        REQUIRE(maxDifference(maps.weights(1, -1), torch::stack(layer1).mean(0)) < 1e-5);
        // The first token's share and sink score, worked out from each full map row by row.
        for (const auto& m : a->maps->requested()) {
            const auto w = m.weights.to(torch::kFloat64).contiguous();
            const double* p = w.data_ptr<double>();
            double share = 0, score = p[0];
            int64_t rows = 0;
            for (int64_t i = 1; i < L; ++i) {
                double mass = 0;
                for (int64_t j = 0; j <= i; ++j) mass += p[i * L + j];
                score += p[i * L];
                if (mass > 0) {
                    share += p[i * L] / mass;
                    ++rows;
                }
            }
            const auto& sink =
                b->layers[size_t(m.ref.layer)].attentionDiagnostics.heads[size_t(m.ref.head)].sink;
            REQUIRE_MESSAGE(
                std::abs(sink.firstTokenShare - share / double(std::max<int64_t>(rows, 1))) < 1e-5,
                name);
            REQUIRE_MESSAGE(std::abs(sink.sinkScore - score / double(L)) < 1e-6, name);
            REQUIRE(sink.sinkHead == (score / double(L) > 0.3));
            REQUIRE(sink.zeroMassRows == L - 1 - rows);
        }

        REQUIRE(a->predictions.size() == b->predictions.size());
        for (size_t i = 0; i < a->predictions.size(); ++i) {
            REQUIRE(a->predictions[i][0].id == b->predictions[i][0].id);
            REQUIRE(std::abs(a->predictions[i][0].probability - b->predictions[i][0].probability) <
                    1e-5);
        }
        for (size_t l = 0; l < a->layers.size(); ++l) {
            const auto& x = a->layers[l].attentionDiagnostics;
            const auto& y = b->layers[l].attentionDiagnostics;
            REQUIRE_MESSAGE(maxDifference(x.rowSparsity, y.rowSparsity) < 1e-6, name);
            // GELU rows whose positive and negative weights nearly cancel (mass 0.005) magnify
            // rounding in the normalised entropy; 1e-4 relative still pins it down.
            REQUIRE_MESSAGE(relativeDifference(x.rowEntropy, y.rowEntropy) < 1e-4, name);
            REQUIRE_MESSAGE(relativeDifference(x.rowMass, y.rowMass) < 1e-5, name);
            for (size_t h = 0; h < x.heads.size(); ++h) {
                const auto& p = x.heads[h];
                const auto& q = y.heads[h];
                requireSameHeadSummary(p, q, name);
                REQUIRE_MESSAGE(std::abs(p.topShare - q.topShare) < 1e-5, name);
            }
        }
    }
}

TEST_CASE("theMapSourceAnswersAlikeFromEveryRepresentation") {
    const Fixture& fx = fixture();
    // The same questions to a source holding every map materialised by the forward pass and
    // to one holding only queries and keys (with overviews): the same answers, whichever
    // representation the source picks; a source with neither says it has no map.
    CaptureRequest full = viewerRequest(fx.tiny.model->info().trained, 0.1);
    full.lazyMaps = false;
    full.allMaps = true;
    full.overviewCells = 0;
    CaptureRequest lazy = viewerRequest(fx.tiny.model->info().trained, 0.1);
    lazy.overviewCells = 16;
    lazy.overviewFromTokens = 0;  // overviews even for this short text
    auto a = capture(*fx.tiny.model, fx.tiny.tokenizer, fx.text, full);
    auto b = capture(*fx.tiny.model, fx.tiny.tokenizer, fx.text, lazy);
    REQUIRE((a.ok() && b.ok()));
    const auto& x = *a->maps;
    const auto& y = *b->maps;
    REQUIRE((!x.lazy() && y.lazy() && y.overview(0).defined()));
    const int64_t L = x.tokens();
    for (int64_t head : {0, 1, -1}) {
        REQUIRE(maxDifference(x.weights(1, head), y.weights(1, head)) < 1e-5);
        REQUIRE(maxDifference(x.weights(0, head, 3, 17, 2, 9), y.weights(0, head, 3, 17, 2, 9)) <
                1e-5);
        REQUIRE(maxDifference(x.scores(1, head, 0, L, 0, L), y.scores(1, head, 0, L, 0, L)) < 1e-4);
        REQUIRE(std::abs(x.weightAt(1, head, L - 1, 3) - y.weightAt(1, head, L - 1, 3)) < 1e-6);
        const auto px = x.pooled(1, head, 0, L, 0, L, 16, 16, Pooling::Mean);
        const auto py = y.pooled(1, head, 0, L, 0, L, 16, 16, Pooling::Mean);
        REQUIRE(torch::allclose(px, py, 1e-5, 1e-6, /*equal_nan=*/true));
    }
    // The whole map max-pooled comes from y's overview: cells of 32 × 32 tokens (the power
    // of two giving at most 16 a side), the max of x's entries in each.
    REQUIRE_MESSAGE((L > 256 && L <= 512), std::to_string(L));
    const auto fromOverview = y.pooled(0, 1, 0, L, 0, L, 16, 16, Pooling::Max);
    REQUIRE(sameWithNaN(fromOverview, poolUniformByHand(x.weights(0, 1), 32), 1e-6));
    const MapSource none(L, {}, nullptr, {});
    REQUIRE(!none.has(0, 0));
    REQUIRE(!none.weights(0, 0).defined());
    REQUIRE(std::isnan(none.weightAt(0, 0, 1, 0)));
    REQUIRE(!x.weights(0, 0, 5, 2, 0, 3).defined());  // an empty region
}

TEST_CASE("aMapsValueRangeLeavesOutMaskedCells") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const auto r = valueRange(torch::tensor({nan, -2.0f, 0.0f, 0.5f, 3.0f, nan}).view({2, 3}));
    REQUIRE(r.any);
    REQUIRE(r.min == -2.0);
    REQUIRE(r.max == 3.0);
    REQUIRE(r.minPositive == 0.5);
    const auto none = valueRange(torch::tensor({0.0f, -1.0f, nan}));
    REQUIRE(none.any);
    REQUIRE(none.max == 0.0);
    REQUIRE(std::isnan(none.minPositive));  // nothing above 0
    REQUIRE(!valueRange(torch::tensor({nan, nan})).any);
}

TEST_CASE("pooledMapsAgreeWithPoolingByHand") {
    const Fixture& fx = fixture();
    CaptureRequest lazy;
    lazy.run.attention.kind = AttentionKind::Softmax;
    lazy.lazyMaps = true;
    auto r = capture(*fx.tiny.model, fx.tiny.tokenizer, fx.text, lazy);
    REQUIRE(r.ok());
    const auto& maps = *r->maps->lazy();
    const int64_t L = maps.tokens();
    const auto full = maps.weights(0, 1);
    const auto mean = maps.weights(1, -1);
    struct Case {
        int64_t r0, r1, k0, k1, rows, keys;
    };
    // the whole map unevenly, a tile across the diagonal, one above it (all masked), and a
    // region smaller than the requested cells (no pooling)
    for (const Case& c : {Case{0, L, 0, L, 9, 11}, Case{30, 95, 20, 90, 6, 13},
                          Case{5, 20, 40, 60, 3, 4}, Case{50, 58, 45, 52, 100, 100}}) {
        for (bool max : {true, false}) {
            const auto pooling = max ? Pooling::Max : Pooling::Mean;
            const int64_t rows = std::min(c.rows, c.r1 - c.r0),
                          keys = std::min(c.keys, c.k1 - c.k0);
            auto expected = poolByHand(full, c.r0, c.r1, c.k0, c.k1, rows, keys, max);
            auto got = maps.pooled(0, 1, c.r0, c.r1, c.k0, c.k1, c.rows, c.keys, pooling);
            REQUIRE_MESSAGE(sameWithNaN(got, expected, 1e-6),
                            "rows " << c.r0 << "-" << c.r1 << " keys " << c.k0 << "-" << c.k1 << " "
                                    << (max ? "max" : "mean"));
            auto expectedMean = poolByHand(mean, c.r0, c.r1, c.k0, c.k1, rows, keys, max);
            REQUIRE(sameWithNaN(maps.pooled(1, -1, c.r0, c.r1, c.k0, c.k1, c.rows, c.keys, pooling),
                                expectedMean, 1e-6));
        }
    }
    // the region above the diagonal holds only masked entries
    REQUIRE(maps.pooled(0, 1, 5, 20, 40, 60, 3, 4, Pooling::Max).isnan().all().item<bool>());
    // no pooling at full size: the cells are the map itself, masked entries NaN
    auto exact = maps.pooled(0, 1, 0, L, 0, L, L, L, Pooling::Mean);
    REQUIRE(sameWithNaN(exact,
                        full.masked_fill(torch::ones({L, L}, torch::kBool).triu(1),
                                         std::numeric_limits<float>::quiet_NaN()),
                        1e-7));
}

TEST_CASE("overviewsMadeDuringTheForwardEqualPoolingAfterIt") {
    const Fixture& fx = fixture();
    CaptureRequest request;
    request.run.attention.kind = AttentionKind::ReluLen;
    request.lazyMaps = true;
    request.overviewCells = 64;
    request.overviewFromTokens = 0;
    request.blockRows = 17;
    auto r = capture(*fx.tiny.model, fx.tiny.tokenizer, fx.text, request);
    REQUIRE(r.ok());
    const auto& maps = *r->maps->lazy();
    const int64_t L = maps.tokens();
    REQUIRE((r->maps->overview(maps.layers() - 1).defined() &&
             !r->maps->overview(maps.layers()).defined()));
    // Cells of w × w tokens, w the smallest power of two giving at most 64 a side.
    REQUIRE_MESSAGE((L > 256 && L <= 512), std::to_string(L));
    const int64_t w = 8, cells = (L + w - 1) / w;
    for (int64_t l = 0; l < maps.layers(); ++l) {
        REQUIRE(r->maps->overview(l).size(1) == cells);
        for (int64_t h = 0; h < maps.heads(); ++h) {
            const auto overview = r->maps->overview(l)[h];
            const auto byHand = poolUniformByHand(maps.weights(l, h), w);
            REQUIRE(sameWithNaN(overview, byHand, 1e-6));
        }
    }
}

// A capture continuing an earlier one's memory (a text extended at the end) runs only the new
// tokens and must equal a capture of the whole text, on every variant: the ReLU family's
// scale depends on each row's n_i, ReLUFormer's on γ and n_i.
TEST_CASE("topPredictionsBlockByBlockEqualThoseOfTheWholeLogits") {
    // The capture takes each row's top predictions from the final stream 1,024 rows at a time;
    // against the logits of a plain forward pass over every row at once.
    const Fixture& fx = fixture();
    const std::string text = readText(relulens::test::dataPath("excerpt.txt")).substr(0, 14000);
    const RunSpec run = fx.tiny.model->info().trained;
    CaptureRequest request = viewerRequest(run, 0.1);
    auto result = capture(*fx.tiny.model, fx.tiny.tokenizer, text, request);
    REQUIRE(result.ok());
    const int64_t L = int64_t(result->tokens.size());
    REQUIRE(L > 2048);  // two whole blocks and a part
    REQUIRE(L % 1024 != 0);
    std::vector<int64_t> ids;
    for (const auto& t : result->tokens) ids.push_back(t.id);
    torch::NoGradGuard noGrad;
    // The capture's attention path (blocked, as it hands blocks to the diagnostics): a pass that
    // keeps nothing would take the fused kernel, whose sums round differently (~1e-6 here).
    ForwardTrace blocked;
    blocked.options.rowMass = true;
    const auto logits =
        fx.tiny.model->forward(torch::tensor(ids, torch::kLong).view({1, L}), run, &blocked);
    const auto expected = topPredictions(logits[0], request.topK, fx.tiny.tokenizer);
    REQUIRE(int64_t(result->predictions.size()) == L);
    for (int64_t i = 0; i < L; ++i) {
        const auto& p = result->predictions[size_t(i)];
        const auto& q = expected[size_t(i)];
        REQUIRE(p.size() == q.size());
        for (size_t k = 0; k < p.size(); ++k) {
            REQUIRE(p[k].id == q[k].id);
            REQUIRE(std::abs(p[k].probability - q[k].probability) < 1e-6);
        }
    }
}

TEST_CASE("aContinuedCaptureEqualsAFullOne") {
    const Fixture& fx = fixture();
    const std::string whole = fx.text;
    const std::string start = fx.text.substr(0, 420);
    // cut inside a word where its last piece changes when the rest is typed
    const auto wholeTokens = fx.tiny.tokenizer.encode(whole).value();
    std::string midWord;
    for (size_t cut = 500; cut < 580 && midWord.empty(); ++cut) {
        const auto t = fx.tiny.tokenizer.encode(whole.substr(0, cut)).value();
        if (t.back().id != wholeTokens[t.size() - 1].id) midWord = whole.substr(0, cut);
    }
    REQUIRE(!midWord.empty());
    for (const auto& run : everyVariant()) {
        const std::string name = run.attention.label();
        const CaptureRequest request = continuedRequest(run, 13);
        auto full = capture(*fx.tiny.model, fx.tiny.tokenizer, whole, request);
        REQUIRE(full.ok());
        REQUIRE(full->reusedTokens == int64_t(0));

        std::shared_ptr<const CaptureMemory> memory;
        auto first =
            capture(*fx.tiny.model, fx.tiny.tokenizer, start, request, nullptr, nullptr, &memory);
        REQUIRE((first.ok() && memory));
        std::shared_ptr<const CaptureMemory> memory2;
        auto middle = capture(*fx.tiny.model, fx.tiny.tokenizer, midWord, request, nullptr,
                              memory.get(), &memory2);
        REQUIRE((middle.ok() && memory2));
        // every token of the start is shared: the continuation starts at its end
        REQUIRE(middle->reusedTokens == int64_t(first->tokens.size()));
        auto continued =
            capture(*fx.tiny.model, fx.tiny.tokenizer, whole, request, nullptr, memory2.get());
        REQUIRE(continued.ok());
        // the word's last piece changed: from the checkpoint before it
        REQUIRE_MESSAGE(
            (continued->reusedTokens > 0 &&
             continued->reusedTokens < int64_t(middle->tokens.size())),
            name << " reused " << continued->reusedTokens << " of " << middle->tokens.size());
        compareCaptures(*full, *continued, name);
        compareCaptures(*full, *middle, name, /*prefixOnly=*/true);
    }
    // Another request (variant) or a changed start: nothing is reused, and the result is right.
    CaptureRequest softmax = viewerRequest(everyVariant()[0], 0.1);
    CaptureRequest relu = viewerRequest(everyVariant()[1], 0.1);
    std::shared_ptr<const CaptureMemory> memory;
    REQUIRE(
        capture(*fx.tiny.model, fx.tiny.tokenizer, start, softmax, nullptr, nullptr, &memory).ok());
    auto other = capture(*fx.tiny.model, fx.tiny.tokenizer, whole, relu, nullptr, memory.get());
    REQUIRE(other.ok());
    REQUIRE(other->reusedTokens == int64_t(0));
    auto edited =
        capture(*fx.tiny.model, fx.tiny.tokenizer, "Once " + whole, softmax, nullptr, memory.get());
    REQUIRE(edited.ok());
    REQUIRE(edited->reusedTokens == int64_t(0));
    // maps asked for by name are never continued
    CaptureRequest withMaps = softmax;
    withMaps.maps = {{0, 0}};
    auto mapped =
        capture(*fx.tiny.model, fx.tiny.tokenizer, whole, withMaps, nullptr, memory.get());
    REQUIRE(mapped.ok());
    REQUIRE(mapped->reusedTokens == int64_t(0));
}

// Typing at the end: each continuation writes its new rows after the previous capture's, in
// the same storage while there is room (a capture from scratch leaves room after its rows).
// Rows a result sees are never written again: a second continuation of the same memory copies,
// and every result, the earlier ones included, still equals a capture from scratch.
TEST_CASE("continuationsWriteInPlaceWithoutChangingEarlierResults") {
    const Fixture& fx = fixture();
    auto ids = [&](const std::string& text) {
        std::vector<int64_t> out;
        const auto tokens = fx.tiny.tokenizer.encode(text).value();
        for (const auto& t : tokens) out.push_back(t.id);
        return out;
    };
    auto startsWith = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
        return a.size() > b.size() && std::equal(b.begin(), b.end(), a.begin());
    };
    // Cuts of the text whose tokens begin the whole text's: continuations from the end.
    const auto whole = ids(fx.text);
    auto cutNear = [&](size_t from) {
        for (size_t cut = from; cut < from + 60; ++cut) {
            if (startsWith(whole, ids(fx.text.substr(0, cut)))) return fx.text.substr(0, cut);
        }
        return std::string();
    };
    const std::string t1 = cutNear(300), t2 = cutNear(400), t3 = cutNear(500), t4 = fx.text;
    REQUIRE((!t1.empty() && !t2.empty() && !t3.empty() && t1.size() < t2.size() &&
             t2.size() < t3.size()));
    // and another text going on from t2
    std::string other;
    for (const std::string more : {" A stone fell.", " and so on", "; the end", "\n\nAnd so"}) {
        if (other.empty() && startsWith(ids(t2 + more), ids(t2))) other = t2 + more;
    }
    REQUIRE(!other.empty());
    auto storage = [](const CaptureResult& r) { return r.layers[0].slotActivations.data_ptr(); };
    for (const auto& run : everyVariant()) {
        const std::string name = run.attention.label();
        const CaptureRequest request = continuedRequest(run, 11);
        std::shared_ptr<const CaptureMemory> m1, m2, m3;
        auto a = capture(*fx.tiny.model, fx.tiny.tokenizer, t1, request, nullptr, nullptr, &m1);
        REQUIRE((a.ok() && m1));
        auto b = capture(*fx.tiny.model, fx.tiny.tokenizer, t2, request, nullptr, m1.get(), &m2);
        REQUIRE((b.ok() && m2));
        REQUIRE(b->reusedTokens == int64_t(a->tokens.size()));
        REQUIRE_MESSAGE(storage(*b) == storage(*a), name << ": no room after a first capture");
        auto c = capture(*fx.tiny.model, fx.tiny.tokenizer, t3, request, nullptr, m2.get(), &m3);
        REQUIRE(c.ok());
        REQUIRE(c->reusedTokens == int64_t(b->tokens.size()));
        REQUIRE_MESSAGE(storage(*c) == storage(*b), name << ": not written in place");
        REQUIRE(!m3->needsRoom());  // written in place, with room left after it
        // the same memory continued again: its room is taken, so a copy
        auto d = capture(*fx.tiny.model, fx.tiny.tokenizer, other, request, nullptr, m2.get());
        REQUIRE(d.ok());
        REQUIRE(d->reusedTokens == int64_t(b->tokens.size()));
        REQUIRE(storage(*d) != storage(*b));
        // and the third continues in place from the second's end
        auto e = capture(*fx.tiny.model, fx.tiny.tokenizer, t4, request, nullptr, m3.get());
        REQUIRE(e.ok());
        REQUIRE(e->reusedTokens == int64_t(c->tokens.size()));
        REQUIRE(storage(*e) == storage(*b));
        // What needs room: a memory whose room a continuation took (m1's by b, m2's by c, m3's
        // by e); not a capture from scratch's.
        std::shared_ptr<const CaptureMemory> first;
        REQUIRE(
            capture(*fx.tiny.model, fx.tiny.tokenizer, t1, request, nullptr, nullptr, &first).ok());
        REQUIRE(!first->needsRoom());
        REQUIRE(m1->needsRoom());
        REQUIRE(m2->needsRoom());
        REQUIRE(m3->needsRoom());
        // Room made again (while the person reads): stopped at once, nothing is copied; the
        // copy needs no more, and its first continuation is written in place.
        auto slots = [](const CaptureMemory& m) {
            return m.slotActivations[0].tensor().data_ptr();
        };
        REQUIRE(slots(*m1->withRoom([] { return true; })) == slots(*m1));
        const auto roomy = m1->withRoom({});
        REQUIRE(slots(*roomy) != slots(*m1));
        REQUIRE(slots(*roomy->withRoom({})) == slots(*roomy));  // it has room already
        REQUIRE(!roomy->needsRoom());
        auto f = capture(*fx.tiny.model, fx.tiny.tokenizer, t2, request, nullptr, roomy.get());
        REQUIRE(f.ok());
        REQUIRE(f->reusedTokens == int64_t(a->tokens.size()));
        REQUIRE(storage(*f) == slots(*roomy));
        compareCaptures(*b, *f, name + " after room was made");
        for (const auto& [text, result] :
             {std::pair{t1, &*a}, {t2, &*b}, {t3, &*c}, {other, &*d}, {t4, &*e}}) {
            auto full = capture(*fx.tiny.model, fx.tiny.tokenizer, text, request);
            REQUIRE(full.ok());
            compareCaptures(*full, *result, name + " on \"" + text.substr(text.size() - 20) + "\"");
        }
    }
}

// An override or ablation set on layer k, with the capture of the same text before it as
// memory: layers below k are taken from that capture and only k and above run, and every
// diagnostic, prediction, map, the effect and the lens equal a capture without the memory.
// On a bundled model of four layers, for a change at each layer, a layer-wide variant and a
// head ablation, on a softmax and a ReLU ÷ n base.
TEST_CASE("aChangeHigherUpReusesTheLayersBelowIt") {
    const Fixture& fx = fixture();
    const auto& model = *bundledSoftmax().model;
    const auto& tokenizer = bundledSoftmax().tokenizer;
    const int64_t layers = model.info().nLayers;
    REQUIRE(layers == int64_t(4));
    const std::string text = fx.text.substr(0, 400);
    for (const auto& base : {everyVariant()[0], everyVariant()[2]}) {
        CaptureRequest before = viewerRequest(base, 0.1);
        before.overviewCells = 16;
        before.overviewFromTokens = 0;
        before.blockRows = 19;
        before.lens = true;
        std::shared_ptr<const CaptureMemory> memory;
        REQUIRE(
            (capture(model, tokenizer, text, before, nullptr, nullptr, &memory).ok() && memory));
        for (int64_t k = 0; k < layers; ++k) {
            AttentionOverride layerWide;
            layerWide.layer = k;
            layerWide.spec.kind = AttentionKind::Sparsemax;
            AttentionOverride ablation;
            ablation.layer = k;
            ablation.head = 1;
            ablation.ablation = Ablation::Uniform;
            for (const auto& change : {layerWide, ablation}) {
                const std::string name = base.attention.label() + " " + change.label();
                CaptureRequest changed = before;
                changed.run.overrides = {change};
                changed.effect = true;
                auto full = capture(model, tokenizer, text, changed);
                auto reused = capture(model, tokenizer, text, changed, nullptr, memory.get());
                REQUIRE((full.ok() && reused.ok()));
                REQUIRE(full->reusedLayers == int64_t(0));
                // A uniform head has no exact zeros: on a ReLU ÷ n base it switches the whole
                // run's sparsity rule (exact zeros → below τ), so nothing below can be reused.
                const bool ruleSwitches = base.attention.kind == AttentionKind::ReluLen &&
                                          change.ablation == Ablation::Uniform;
                REQUIRE(reused->reusedLayers == (ruleSwitches ? int64_t(0) : k));
                compareCaptures(*full, *reused, name);
                REQUIRE((full->effect && reused->effect && full->lens && reused->lens));
                const auto& a = *full->effect;
                const auto& b = *reused->effect;
                REQUIRE(a.kl.size() == b.kl.size());
                for (size_t i = 0; i < a.kl.size(); ++i) {
                    REQUIRE_MESSAGE((std::abs(a.kl[i] - b.kl[i]) < 1e-5 &&
                                     std::abs(a.deltaLogProb[i] - b.deltaLogProb[i]) < 1e-4),
                                    name);
                }
                REQUIRE_MESSAGE((std::abs(a.loss - b.loss) < 1e-5 &&
                                 std::abs(a.unchangedLoss - b.unchangedLoss) < 1e-5),
                                name);
                // the change matters: it is not an empty run compared with itself
                REQUIRE_MESSAGE(a.unchangedLoss != a.loss, name);
                REQUIRE_MESSAGE(maxDifference(full->lens->nextTokenProbability,
                                              reused->lens->nextTokenProbability) < 1e-5,
                                name);
            }
        }
    }
    // Another FFN variant or other tokens: nothing is taken from below.
    CaptureRequest other = viewerRequest(everyVariant()[0], 0.1);
    std::shared_ptr<const CaptureMemory> memory;
    REQUIRE(capture(model, tokenizer, text, other, nullptr, nullptr, &memory).ok());
    CaptureRequest changed = other;
    AttentionOverride high;
    high.layer = 3;
    high.spec.kind = AttentionKind::ReluLen;
    changed.run.overrides = {high};
    auto elsewhere = capture(model, tokenizer, text + " more", changed, nullptr, memory.get());
    REQUIRE(elsewhere.ok());
    REQUIRE(elsewhere->reusedLayers == int64_t(0));
    changed.run.ffn = FfnKind::Gelu;
    auto otherFfn = capture(model, tokenizer, text, changed, nullptr, memory.get());
    REQUIRE(otherFfn.ok());
    REQUIRE(otherFfn->reusedLayers == int64_t(0));
}

// The window's comparison is captured under the variant a toggle goes to, without slot
// activations and with the top prediction only. Its memory serves the toggle's capture: every
// layer but the top one is taken from it, and the result (slot activations and the top 10
// included) equals a capture from scratch.
TEST_CASE("theComparisonsMemoryServesAToggleToItsVariant") {
    const Fixture& fx = fixture();
    const auto& model = *bundledSoftmax().model;
    const auto& tokenizer = bundledSoftmax().tokenizer;
    const int64_t layers = model.info().nLayers;
    const std::string text = fx.text.substr(0, 400);
    for (const auto& run : {everyVariant()[0], everyVariant()[2]}) {
        const std::string name = run.attention.label();
        CaptureRequest shown = viewerRequest(run, 0.1);
        shown.overviewCells = 16;
        shown.overviewFromTokens = 0;
        shown.lens = true;
        CaptureRequest compared = shown;
        compared.slotActivations = false;
        compared.topK = 1;
        compared.lens = false;
        std::shared_ptr<const CaptureMemory> memory;
        auto comparison = capture(model, tokenizer, text, compared, nullptr, nullptr, &memory);
        REQUIRE((comparison.ok() && memory));
        REQUIRE(comparison->predictions[0].size() == size_t(1));
        REQUIRE(!comparison->layers[0].slotActivations.defined());
        REQUIRE(memory->canServe(model, shown));
        auto full = capture(model, tokenizer, text, shown);
        auto toggled = capture(model, tokenizer, text, shown, nullptr, memory.get());
        REQUIRE((full.ok() && toggled.ok()));
        REQUIRE(full->reusedLayers == int64_t(0));
        REQUIRE_MESSAGE(toggled->reusedLayers == layers - 1, name);
        REQUIRE(toggled->predictions[0].size() == size_t(10));
        compareCaptures(*full, *toggled, name);
        REQUIRE_MESSAGE(maxDifference(full->lens->nextTokenProbability,
                                      toggled->lens->nextTokenProbability) < 1e-5,
                        name);
        // Another variant, another FFN, τ or maps asked for by name: not served.
        CaptureRequest other = shown;
        other.run = everyVariant()[run.attention.kind == AttentionKind::Softmax ? 2 : 0];
        REQUIRE(!memory->canServe(model, other));
        other = shown;
        other.run.ffn = FfnKind::Gelu;
        REQUIRE(!memory->canServe(model, other));
        other = shown;
        other.tauScale = 0.2;
        REQUIRE(!memory->canServe(model, other));
        other = shown;
        other.maps = {{0, 0}};
        REQUIRE(!memory->canServe(model, other));
        REQUIRE(!memory->canServe(*fx.tiny.model, shown));
    }
}

TEST_CASE("pooledMapTakesBlocksInAnyOrder") {
    // A hand-made 6×6 causal map pooled to 2×3 cells from blocks given out of order.
    auto full = torch::arange(36, torch::kFloat32).view({1, 6, 6}) + 1;
    full = full * torch::ones({6, 6}).tril();
    PooledMap map(1, 0, 6, 0, 6, 2, 3, Pooling::Max, torch::kCPU);
    map.add(full.narrow(1, 4, 2), 4);
    map.add(full.narrow(1, 0, 2).narrow(2, 0, 2), 0);  // keys past a block's rows are masked
    map.add(full.narrow(1, 2, 2).narrow(2, 0, 4), 2);
    // rows 0-2 × keys 0-1: max of 1, 7, 8, 13, 14 = 14; keys 2-3: 15; keys 4-5: all masked
    // rows 3-5 × keys 0-1: 32; keys 2-3: 34; keys 4-5: 35, 36 (row 5) and 29 → 36
    auto got = map.result()[0];
    REQUIRE(std::isnan(got[0][2].item<float>()));
    REQUIRE(got[0][0].item<float>() == doctest::Approx(14.0f).epsilon(1e-5));
    REQUIRE(got[0][1].item<float>() == doctest::Approx(15.0f).epsilon(1e-5));
    REQUIRE(got[1][0].item<float>() == doctest::Approx(32.0f).epsilon(1e-5));
    REQUIRE(got[1][1].item<float>() == doctest::Approx(34.0f).epsilon(1e-5));
    REQUIRE(got[1][2].item<float>() == doctest::Approx(36.0f).epsilon(1e-5));
    PooledMap mean(1, 0, 6, 0, 6, 2, 3, Pooling::Mean, torch::kCPU);
    mean.add(full, 0);
    // rows 3-5 × keys 4-5: visible 29 (row 4, key 4), 35, 36 (row 5) → 100 / 3
    REQUIRE(std::abs(mean.result()[0][1][2].item<float>() - 100.0f / 3) < 1e-5);
}

TEST_CASE("twoCoresRunBothHalvesAndPassOnErrors") {
    const auto here = std::this_thread::get_id();
    std::thread::id first, second, innerFirst, innerSecond;
    bool firstGrad = true;
    {
        torch::NoGradGuard noGrad;  // the helper takes the caller's autograd mode
        runOnTwoCores(
            [&] {
                first = std::this_thread::get_id();
                firstGrad = torch::GradMode::is_enabled();
                // The helper is busy with this call: a call from inside runs both halves here.
                runOnTwoCores([&] { innerFirst = std::this_thread::get_id(); },
                              [&] { innerSecond = std::this_thread::get_id(); });
            },
            [&] { second = std::this_thread::get_id(); });
    }
    REQUIRE(second == here);
    REQUIRE(!firstGrad);
    REQUIRE((innerFirst == first && innerSecond == first));
    if (secondCoreAvailable()) REQUIRE(first != here);
    runOnTwoCores([&] { firstGrad = torch::GradMode::is_enabled(); }, [] {});
    REQUIRE(firstGrad);
    // An error on either side comes out here once both sides are done; the first's if both.
    bool secondRan = false;
    REQUIRE_THROWS_WITH(
        runOnTwoCores([] { throw std::runtime_error("first half"); }, [&] { secondRan = true; }),
        "first half");
    REQUIRE(secondRan);
    REQUIRE_THROWS_WITH(runOnTwoCores([] {}, [] { throw std::runtime_error("second half"); }),
                        "second half");
    REQUIRE_THROWS_WITH(runOnTwoCores([] { throw std::runtime_error("first half"); },
                                      [] { throw std::runtime_error("second half"); }),
                        "first half");
    int sum = 0;  // and the helper still works after errors
    runOnTwoCores([&] { sum += 1; }, [&] { sum += 2; });
    REQUIRE(sum == 3);
}

TEST_CASE("pooledMapTakesHeadsInTwoPartsFromTwoThreads") {
    // The map above as three heads, head k scaled by k + 1, each block of rows handed over as
    // head 0 and heads 1..2 at once from two threads (as the forward pass does on two cores).
    // The cells' entries are counted once, so the mean is the single head's times k + 1.
    auto one = torch::arange(36, torch::kFloat32).view({1, 6, 6}) + 1;
    one = one * torch::ones({6, 6}).tril();
    const auto heads = torch::cat({one, one * 2, one * 3}, 0);  // (3, 6, 6)
    for (const Pooling pooling : {Pooling::Max, Pooling::Mean}) {
        PooledMap map(3, 0, 6, 0, 6, 2, 3, pooling, torch::kCPU);
        for (int64_t r0 : {4, 0, 2}) {
            const auto block = heads.narrow(1, r0, 2).narrow(2, 0, r0 + 2);
            runOnTwoCores([&] { map.add(block.narrow(0, 0, 1).contiguous(), r0, 0); },
                          [&] { map.add(block.narrow(0, 1, 2).contiguous(), r0, 1); });
        }
        const auto got = map.result();
        for (int64_t k = 0; k < 3; ++k) {
            INFO("head " << k << std::string(pooling == Pooling::Max ? ", max" : ", mean"));
            const float f = float(k + 1);
            REQUIRE(std::isnan(got[k][0][2].item<float>()));
            if (pooling == Pooling::Max) {
                REQUIRE(got[k][0][0].item<float>() == doctest::Approx(14.0f * f).epsilon(1e-5));
                REQUIRE(got[k][1][1].item<float>() == doctest::Approx(34.0f * f).epsilon(1e-5));
                REQUIRE(got[k][1][2].item<float>() == doctest::Approx(36.0f * f).epsilon(1e-5));
            } else {
                // rows 0-2 × keys 0-1: 1, 7, 8, 13, 14 → 43 / 5; rows 3-5 × keys 4-5: 100 / 3
                REQUIRE(got[k][0][0].item<float>() == doctest::Approx(43.0f / 5 * f).epsilon(1e-5));
                REQUIRE(got[k][1][2].item<float>() ==
                        doctest::Approx(100.0f / 3 * f).epsilon(1e-5));
            }
        }
    }
}

TEST_CASE("badRegionsAreRefused") {
    const Fixture& fx = fixture();
    CaptureRequest lazy;
    lazy.lazyMaps = true;
    auto r = capture(*fx.tiny.model, fx.tiny.tokenizer, "a short text", lazy);
    REQUIRE(r.ok());
    const auto& maps = *r->maps->lazy();
    REQUIRE_THROWS_AS(maps.weights(5, 0), std::out_of_range);
    REQUIRE_THROWS_AS(maps.weights(0, 0, 0, maps.tokens() + 1, 0, 1), std::out_of_range);
    REQUIRE_THROWS_AS(maps.pooled(0, 9, 0, 1, 0, 1, 1, 1, Pooling::Max), std::out_of_range);
}

TEST_CASE("everyMapAtOnceIsCappedButLazyIsNot") {
    const Fixture& fx = fixture();
    std::string text;
    while (text.size() < 5000) text += fx.text;
    CaptureRequest full;
    full.allMaps = true;
    full.maxAllMapsTokens = 200;
    auto refused = capture(*fx.tiny.model, fx.tiny.tokenizer, text, full);
    REQUIRE(!refused.ok());
    REQUIRE_MESSAGE(
        relulens::test::contains(refused.error(), "every map at once is kept for at most 200"),
        refused.error());
    CaptureRequest lazy;
    lazy.lazyMaps = true;
    lazy.maxAllMapsTokens = 200;
    auto fine = capture(*fx.tiny.model, fx.tiny.tokenizer, text, lazy);
    REQUIRE_MESSAGE(fine.ok(), (fine ? "" : fine.error().c_str()));
    REQUIRE(fine->maps->lazy()->tokens() > 200);
}
