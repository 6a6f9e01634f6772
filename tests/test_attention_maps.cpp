// Lazy capture against the full one: maps rebuilt from queries and keys, diagnostics accumulated
// over blocks of rows, and pooled (level-of-detail) maps against pooling done by hand.
#include <QtTest>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/attention.h"
#include "core/attention_maps.h"
#include "core/capture.h"
#include "core/checkpoint.h"
#include "test_support.h"

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

}  // namespace

class TestAttentionMaps : public QObject {
    Q_OBJECT
private:
    std::optional<LoadedModel> tiny_;
    std::string text_;

    // b against a capture a of the same text (or, prefixOnly, of a longer text starting with it).
    static void compareCaptures(const CaptureResult& a, const CaptureResult& b,
                                const QByteArray& name, bool prefixOnly = false) {
        const int64_t L = int64_t(b.tokens.size());
        if (!prefixOnly) QCOMPARE(int64_t(a.tokens.size()), L);
        for (int64_t i = 0; i < L - (prefixOnly ? 1 : 0); ++i) {
            QCOMPARE(a.tokens[size_t(i)].id, b.tokens[size_t(i)].id);
        }
        const int64_t rows = prefixOnly ? L - 2 : L;  // the last piece may differ in the prefix
        for (int64_t i = 0; i < rows; ++i) {
            const auto& p = a.predictions[size_t(i)];
            const auto& q = b.predictions[size_t(i)];
            QCOMPARE(p.size(), q.size());
            for (size_t k = 0; k < p.size(); ++k) {
                QVERIFY2(std::abs(p[k].probability - q[k].probability) < 1e-5, name);
            }
            QCOMPARE(p[0].id, q[0].id);
        }
        for (size_t l = 0; l < a.layers.size(); ++l) {
            const auto& x = a.layers[l];
            const auto& y = b.layers[l];
            auto head = [&](const torch::Tensor& t) { return t.narrow(-1, 0, rows); };
            QVERIFY2(maxDifference(head(x.attentionDiagnostics.rowSparsity),
                                   head(y.attentionDiagnostics.rowSparsity)) < 1e-6,
                     qPrintable(QString("%1, layer %2: row sparsity %3 apart")
                                    .arg(name.constData())
                                    .arg(l)
                                    .arg(maxDifference(head(x.attentionDiagnostics.rowSparsity),
                                                       head(y.attentionDiagnostics.rowSparsity)))));
            QVERIFY2(relativeDifference(head(x.attentionDiagnostics.rowEntropy),
                                        head(y.attentionDiagnostics.rowEntropy)) < 1e-4,
                     name);
            QVERIFY2(relativeDifference(head(x.attentionDiagnostics.rowMass),
                                        head(y.attentionDiagnostics.rowMass)) < 1e-5,
                     name);
            QVERIFY2(relativeDifference(x.slotActivations.narrow(0, 0, rows),
                                        y.slotActivations.narrow(0, 0, rows)) < 1e-5,
                     name);
            const auto maps = b.maps->lazy();
            QVERIFY(maps);
            for (int64_t h = 0; h < maps->heads(); h += 3) {
                QVERIFY2(maxDifference(a.maps->weights(int64_t(l), h, 0, rows, 0, rows),
                                       b.maps->weights(int64_t(l), h, 0, rows, 0, rows)) < 1e-5,
                         name);
            }
            if (prefixOnly) continue;
            QVERIFY2(relativeDifference(x.ffn.tokenSparsity, y.ffn.tokenSparsity) < 1e-6, name);
            QVERIFY2(close(x.ffn.sparsity, y.ffn.sparsity, 1e-6), name);
            QVERIFY2(close(x.ffn.outputVariance, y.ffn.outputVariance, 1e-5), name);
            QVERIFY(sameWithNaN(a.maps->overview(int64_t(l)), b.maps->overview(int64_t(l)), 1e-6));
            QCOMPARE(x.attentionDiagnostics.outputVarianceByN.size(),
                     y.attentionDiagnostics.outputVarianceByN.size());
            for (size_t h = 0; h < x.attentionDiagnostics.heads.size(); ++h) {
                const auto& p = x.attentionDiagnostics.heads[h];
                const auto& q = y.attentionDiagnostics.heads[h];
                QVERIFY2(std::abs(p.sparsity - q.sparsity) < 1e-6, name);
                QVERIFY2(close(p.rowMass, q.rowMass, 1e-5), name);
                QVERIFY2(close(p.entropy, q.entropy, 1e-4), name);
                QVERIFY2(std::abs(p.topOnePercentShare - q.topOnePercentShare) < 1e-5, name);
                QVERIFY2(close(p.outputVariance, q.outputVariance, 1e-5), name);
                QCOMPARE(p.emptyRows, q.emptyRows);
                QCOMPARE(p.distanceProfile.size(), q.distanceProfile.size());
                for (size_t d = 0; d < p.distanceProfile.size(); ++d) {
                    QVERIFY2(close(p.distanceProfile[d], q.distanceProfile[d], 1e-5), name);
                }
                QVERIFY2(std::abs(p.sink.firstTokenShare - q.sink.firstTokenShare) < 1e-5, name);
                QVERIFY2(std::abs(p.sink.sinkScore - q.sink.sinkScore) < 1e-5, name);
                QCOMPARE(p.sink.sinkHead, q.sink.sinkHead);
                QVERIFY2(close(p.sink.firstKeyNorm, q.sink.firstKeyNorm, 1e-5), name);
                QVERIFY2(close(p.sink.otherValueNorm, q.sink.otherValueNorm, 1e-5), name);
            }
            QVERIFY2(close(x.residual.medianAbs, y.residual.medianAbs, 1e-5), name);
            QVERIFY2(close(x.residual.kurtosis, y.residual.kurtosis, 1e-4), name);
            QCOMPARE(x.residual.largest[0].token, y.residual.largest[0].token);
            QCOMPARE(x.residual.largest[0].dimension, y.residual.largest[0].dimension);
        }
    }

private Q_SLOTS:
    void initTestCase() {
        auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
        QVERIFY2(loaded.ok(), loaded ? "" : loaded.error().c_str());
        tiny_.emplace(std::move(*loaded));
        text_ = readText(relulens::test::dataPath("excerpt.txt")).substr(0, 600);
    }

    void inPlaceMaskingEqualsTheGeneralPath() {
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
                QVERIFY2(maxDifference(fast, general) < 1e-6, run.attention.label().c_str());
                QVERIFY(fast.narrow(-1, offset, 4).triu(1).abs().sum().item<double>() == 0);
            }
        }
    }

    void blockedForwardEqualsOneBlock() {
        torch::NoGradGuard noGrad;
        auto ids = torch::randint(0, tiny_->model->info().vocabSize, {2, 50}, torch::kLong);
        for (const auto& run : everyVariant()) {
            auto whole = tiny_->model->forward(ids, run);
            ForwardTrace blocked;
            blocked.blockRows = 7;  // 50 rows: 7 blocks of 7 and one of 1
            int blocks = 0;
            blocked.onAttentionBlock = [&](int64_t, int64_t, const torch::Tensor&) { ++blocks; };
            auto pieces = tiny_->model->forward(ids, run, &blocked);
            QCOMPARE(blocks, 8 * int(tiny_->model->info().nLayers));
            QVERIFY2(maxDifference(whole, pieces) < 1e-4, run.attention.label().c_str());
        }
    }

    void lazyAndFullCaptureAgreeOnEveryVariant() {
        for (const auto& run : everyVariant()) {
            const QByteArray name = QByteArray::fromStdString(run.attention.label());
            CaptureRequest full;
            full.run = run;
            full.allMaps = true;
            auto a = capture(*tiny_->model, tiny_->tokenizer, text_, full);
            QVERIFY2(a.ok(), a ? "" : a.error().c_str());
            CaptureRequest lazy;
            lazy.run = run;
            lazy.lazyMaps = true;
            lazy.blockRows = 13;  // diagnostics accumulated over many blocks of rows
            auto b = capture(*tiny_->model, tiny_->tokenizer, text_, lazy);
            QVERIFY2(b.ok(), b ? "" : b.error().c_str());
            QVERIFY(b->maps->requested().empty());
            QVERIFY(b->maps->lazy());
            const auto& maps = *b->maps->lazy();
            const int64_t L = int64_t(a->tokens.size());
            QVERIFY(L > 100);
            QCOMPARE(maps.tokens(), L);
            for (const auto& m : a->maps->requested()) {
                const auto w = maps.weights(m.ref.layer, m.ref.head);
                QVERIFY2(
                    maxDifference(w, m.weights) < 1e-5,
                    qPrintable(
                        QString("%1 %2").arg(name.constData()).arg(maxDifference(w, m.weights))));
                const auto s = maps.scores(m.ref.layer, m.ref.head, 0, L, 0, L);
                QVERIFY2(relativeDifference(s, m.scores) < 1e-5, name);
                // a tile is the same slice of the map
                const auto tile = maps.weights(m.ref.layer, m.ref.head, 40, 77, 10, 61);
                QVERIFY2(maxDifference(tile, m.weights.slice(0, 40, 77).slice(1, 10, 61)) < 1e-5,
                         name);
            }
            // the mean of a layer's heads
            std::vector<torch::Tensor> layer1;
            for (const auto& m : a->maps->requested()) {
                if (m.ref.layer == 1) layer1.push_back(m.weights);
            }
            QVERIFY(maxDifference(maps.weights(1, -1), torch::stack(layer1).mean(0)) < 1e-5);
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
                const auto& sink = b->layers[size_t(m.ref.layer)]
                                       .attentionDiagnostics.heads[size_t(m.ref.head)]
                                       .sink;
                QVERIFY2(std::abs(sink.firstTokenShare -
                                  share / double(std::max<int64_t>(rows, 1))) < 1e-5,
                         name);
                QVERIFY2(std::abs(sink.sinkScore - score / double(L)) < 1e-6, name);
                QCOMPARE(sink.sinkHead, score / double(L) > 0.3);
                QCOMPARE(sink.zeroMassRows, L - 1 - rows);
            }

            QCOMPARE(a->predictions.size(), b->predictions.size());
            for (size_t i = 0; i < a->predictions.size(); ++i) {
                QCOMPARE(a->predictions[i][0].id, b->predictions[i][0].id);
                QVERIFY(std::abs(a->predictions[i][0].probability -
                                 b->predictions[i][0].probability) < 1e-5);
            }
            for (size_t l = 0; l < a->layers.size(); ++l) {
                const auto& x = a->layers[l].attentionDiagnostics;
                const auto& y = b->layers[l].attentionDiagnostics;
                QVERIFY2(maxDifference(x.rowSparsity, y.rowSparsity) < 1e-6, name);
                // GELU rows whose positive and negative weights nearly cancel (mass 0.005) magnify
                // rounding in the normalised entropy; 1e-4 relative still pins it down.
                QVERIFY2(relativeDifference(x.rowEntropy, y.rowEntropy) < 1e-4, name);
                QVERIFY2(relativeDifference(x.rowMass, y.rowMass) < 1e-5, name);
                for (size_t h = 0; h < x.heads.size(); ++h) {
                    const auto& p = x.heads[h];
                    const auto& q = y.heads[h];
                    QVERIFY2(std::abs(p.sparsity - q.sparsity) < 1e-6, name);
                    QVERIFY2(close(p.rowMass, q.rowMass, 1e-5), name);
                    QVERIFY2(close(p.entropy, q.entropy, 1e-4), name);
                    QVERIFY2(std::abs(p.topShare - q.topShare) < 1e-5, name);
                    QVERIFY2(std::abs(p.topOnePercentShare - q.topOnePercentShare) < 1e-5, name);
                    QVERIFY2(close(p.outputVariance, q.outputVariance, 1e-5), name);
                    QCOMPARE(p.emptyRows, q.emptyRows);
                    QCOMPARE(p.distanceProfile.size(), q.distanceProfile.size());
                    for (size_t d = 0; d < p.distanceProfile.size(); ++d) {
                        QVERIFY2(close(p.distanceProfile[d], q.distanceProfile[d], 1e-5), name);
                    }
                }
            }
        }
    }

    void theMapSourceAnswersAlikeFromEveryRepresentation() {
        // The same questions to a source holding every map materialised by the forward pass and
        // to one holding only queries and keys (with overviews): the same answers, whichever
        // representation the source picks; a source with neither says it has no map.
        CaptureRequest full = viewerRequest(tiny_->model->info().trained, 0.1);
        full.lazyMaps = false;
        full.allMaps = true;
        full.overviewCells = 0;
        CaptureRequest lazy = viewerRequest(tiny_->model->info().trained, 0.1);
        lazy.overviewCells = 16;
        lazy.overviewFromTokens = 0;  // overviews even for this short text
        auto a = capture(*tiny_->model, tiny_->tokenizer, text_, full);
        auto b = capture(*tiny_->model, tiny_->tokenizer, text_, lazy);
        QVERIFY(a.ok() && b.ok());
        const auto& x = *a->maps;
        const auto& y = *b->maps;
        QVERIFY(!x.lazy() && y.lazy() && y.overview(0).defined());
        const int64_t L = x.tokens();
        for (int64_t head : {0, 1, -1}) {
            QVERIFY(maxDifference(x.weights(1, head), y.weights(1, head)) < 1e-5);
            QVERIFY(maxDifference(x.weights(0, head, 3, 17, 2, 9),
                                  y.weights(0, head, 3, 17, 2, 9)) < 1e-5);
            QVERIFY(maxDifference(x.scores(1, head, 0, L, 0, L), y.scores(1, head, 0, L, 0, L)) <
                    1e-4);
            QVERIFY(std::abs(x.weightAt(1, head, L - 1, 3) - y.weightAt(1, head, L - 1, 3)) < 1e-6);
            const auto px = x.pooled(1, head, 0, L, 0, L, 16, 16, Pooling::Mean);
            const auto py = y.pooled(1, head, 0, L, 0, L, 16, 16, Pooling::Mean);
            QVERIFY(torch::allclose(px, py, 1e-5, 1e-6, /*equal_nan=*/true));
        }
        // The whole map max-pooled comes from y's overview: cells of 32 × 32 tokens (the power
        // of two giving at most 16 a side), the max of x's entries in each.
        QVERIFY2(L > 256 && L <= 512, qPrintable(QString::number(L)));
        const auto fromOverview = y.pooled(0, 1, 0, L, 0, L, 16, 16, Pooling::Max);
        QVERIFY(sameWithNaN(fromOverview, poolUniformByHand(x.weights(0, 1), 32), 1e-6));
        const MapSource none(L, {}, nullptr, {});
        QVERIFY(!none.has(0, 0));
        QVERIFY(!none.weights(0, 0).defined());
        QVERIFY(std::isnan(none.weightAt(0, 0, 1, 0)));
        QVERIFY(!x.weights(0, 0, 5, 2, 0, 3).defined());  // an empty region
    }

    void pooledMapsAgreeWithPoolingByHand() {
        CaptureRequest lazy;
        lazy.run.attention.kind = AttentionKind::Softmax;
        lazy.lazyMaps = true;
        auto r = capture(*tiny_->model, tiny_->tokenizer, text_, lazy);
        QVERIFY(r.ok());
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
                QVERIFY2(sameWithNaN(got, expected, 1e-6),
                         qPrintable(QString("rows %1-%2 keys %3-%4 %5")
                                        .arg(c.r0)
                                        .arg(c.r1)
                                        .arg(c.k0)
                                        .arg(c.k1)
                                        .arg(max ? "max" : "mean")));
                auto expectedMean = poolByHand(mean, c.r0, c.r1, c.k0, c.k1, rows, keys, max);
                QVERIFY(
                    sameWithNaN(maps.pooled(1, -1, c.r0, c.r1, c.k0, c.k1, c.rows, c.keys, pooling),
                                expectedMean, 1e-6));
            }
        }
        // the region above the diagonal holds only masked entries
        QVERIFY(maps.pooled(0, 1, 5, 20, 40, 60, 3, 4, Pooling::Max).isnan().all().item<bool>());
        // no pooling at full size: the cells are the map itself, masked entries NaN
        auto exact = maps.pooled(0, 1, 0, L, 0, L, L, L, Pooling::Mean);
        QVERIFY(sameWithNaN(exact,
                            full.masked_fill(torch::ones({L, L}, torch::kBool).triu(1),
                                             std::numeric_limits<float>::quiet_NaN()),
                            1e-7));
    }

    void overviewsMadeDuringTheForwardEqualPoolingAfterIt() {
        CaptureRequest request;
        request.run.attention.kind = AttentionKind::ReluLen;
        request.lazyMaps = true;
        request.overviewCells = 64;
        request.overviewFromTokens = 0;
        request.blockRows = 17;
        auto r = capture(*tiny_->model, tiny_->tokenizer, text_, request);
        QVERIFY(r.ok());
        const auto& maps = *r->maps->lazy();
        const int64_t L = maps.tokens();
        QVERIFY(r->maps->overview(maps.layers() - 1).defined() &&
                !r->maps->overview(maps.layers()).defined());
        // Cells of w × w tokens, w the smallest power of two giving at most 64 a side.
        QVERIFY2(L > 256 && L <= 512, qPrintable(QString::number(L)));
        const int64_t w = 8, cells = (L + w - 1) / w;
        for (int64_t l = 0; l < maps.layers(); ++l) {
            QCOMPARE(r->maps->overview(l).size(1), cells);
            for (int64_t h = 0; h < maps.heads(); ++h) {
                const auto overview = r->maps->overview(l)[h];
                const auto byHand = poolUniformByHand(maps.weights(l, h), w);
                QVERIFY(sameWithNaN(overview, byHand, 1e-6));
            }
        }
    }

    // A capture continuing an earlier one's memory (a text extended at the end) runs only the new
    // tokens and must equal a capture of the whole text, on every variant: the ReLU family's
    // scale depends on each row's n_i, ReLUFormer's on γ and n_i.
    void aContinuedCaptureEqualsAFullOne() {
        const std::string whole = text_;
        const std::string start = text_.substr(0, 420);
        // cut inside a word where its last piece changes when the rest is typed
        const auto wholeTokens = tiny_->tokenizer.encode(whole).value();
        std::string midWord;
        for (size_t cut = 500; cut < 580 && midWord.empty(); ++cut) {
            const auto t = tiny_->tokenizer.encode(whole.substr(0, cut)).value();
            if (t.back().id != wholeTokens[t.size() - 1].id) midWord = whole.substr(0, cut);
        }
        QVERIFY(!midWord.empty());
        for (const auto& run : everyVariant()) {
            const QByteArray name = QByteArray::fromStdString(run.attention.label());
            CaptureRequest request = viewerRequest(run, 0.1);
            request.overviewCells = 16;
            request.overviewFromTokens = 0;
            request.blockRows = 13;
            auto full = capture(*tiny_->model, tiny_->tokenizer, whole, request);
            QVERIFY(full.ok());
            QCOMPARE(full->reusedTokens, int64_t(0));

            std::shared_ptr<const CaptureMemory> memory;
            auto first =
                capture(*tiny_->model, tiny_->tokenizer, start, request, nullptr, nullptr, &memory);
            QVERIFY(first.ok() && memory);
            std::shared_ptr<const CaptureMemory> memory2;
            auto middle = capture(*tiny_->model, tiny_->tokenizer, midWord, request, nullptr,
                                  memory.get(), &memory2);
            QVERIFY(middle.ok() && memory2);
            // every token of the start is shared: the continuation starts at its end
            QCOMPARE(middle->reusedTokens, int64_t(first->tokens.size()));
            auto continued =
                capture(*tiny_->model, tiny_->tokenizer, whole, request, nullptr, memory2.get());
            QVERIFY(continued.ok());
            // the word's last piece changed: from the checkpoint before it
            QVERIFY2(continued->reusedTokens > 0 &&
                         continued->reusedTokens < int64_t(middle->tokens.size()),
                     qPrintable(QString("%1 reused %2 of %3")
                                    .arg(name.constData())
                                    .arg(continued->reusedTokens)
                                    .arg(middle->tokens.size())));
            compareCaptures(*full, *continued, name);
            if (QTest::currentTestFailed()) return;
            compareCaptures(*full, *middle, name, /*prefixOnly=*/true);
            if (QTest::currentTestFailed()) return;
        }
        // Another request (variant) or a changed start: nothing is reused, and the result is right.
        CaptureRequest softmax = viewerRequest(everyVariant()[0], 0.1);
        CaptureRequest relu = viewerRequest(everyVariant()[1], 0.1);
        std::shared_ptr<const CaptureMemory> memory;
        QVERIFY(capture(*tiny_->model, tiny_->tokenizer, start, softmax, nullptr, nullptr, &memory)
                    .ok());
        auto other = capture(*tiny_->model, tiny_->tokenizer, whole, relu, nullptr, memory.get());
        QVERIFY(other.ok());
        QCOMPARE(other->reusedTokens, int64_t(0));
        auto edited = capture(*tiny_->model, tiny_->tokenizer, "Once " + whole, softmax, nullptr,
                              memory.get());
        QVERIFY(edited.ok());
        QCOMPARE(edited->reusedTokens, int64_t(0));
        // maps asked for by name are never continued
        CaptureRequest withMaps = softmax;
        withMaps.maps = {{0, 0}};
        auto mapped =
            capture(*tiny_->model, tiny_->tokenizer, whole, withMaps, nullptr, memory.get());
        QVERIFY(mapped.ok());
        QCOMPARE(mapped->reusedTokens, int64_t(0));
    }

    // An override or ablation set on layer k, with the capture of the same text before it as
    // memory: layers below k are taken from that capture and only k and above run, and every
    // diagnostic, prediction, map, the effect and the lens equal a capture without the memory.
    // On a bundled model of four layers, for a change at each layer, a layer-wide variant and a
    // head ablation, on a softmax and a ReLU ÷ n base.
    void aChangeHigherUpReusesTheLayersBelowIt() {
        auto loaded = loadModelFolder(std::string(RELULENS_RESOURCES) + "/models/softmax");
        QVERIFY2(loaded.ok(), loaded ? "" : loaded.error().c_str());
        const auto& model = *loaded->model;
        const auto& tokenizer = loaded->tokenizer;
        const int64_t layers = model.info().nLayers;
        QCOMPARE(layers, int64_t(4));
        const std::string text = text_.substr(0, 400);
        for (const auto& base : {everyVariant()[0], everyVariant()[2]}) {
            CaptureRequest before = viewerRequest(base, 0.1);
            before.overviewCells = 16;
            before.overviewFromTokens = 0;
            before.blockRows = 19;
            before.lens = true;
            std::shared_ptr<const CaptureMemory> memory;
            QVERIFY(capture(model, tokenizer, text, before, nullptr, nullptr, &memory).ok() &&
                    memory);
            for (int64_t k = 0; k < layers; ++k) {
                AttentionOverride layerWide;
                layerWide.layer = k;
                layerWide.spec.kind = AttentionKind::Sparsemax;
                AttentionOverride ablation;
                ablation.layer = k;
                ablation.head = 1;
                ablation.ablation = Ablation::Uniform;
                for (const auto& change : {layerWide, ablation}) {
                    const QByteArray name =
                        QByteArray::fromStdString(base.attention.label() + " " + change.label());
                    CaptureRequest changed = before;
                    changed.run.overrides = {change};
                    changed.effect = true;
                    auto full = capture(model, tokenizer, text, changed);
                    auto reused = capture(model, tokenizer, text, changed, nullptr, memory.get());
                    QVERIFY(full.ok() && reused.ok());
                    QCOMPARE(full->reusedLayers, int64_t(0));
                    // A uniform head has no exact zeros: on a ReLU ÷ n base it switches the whole
                    // run's sparsity rule (exact zeros → below τ), so nothing below can be reused.
                    const bool ruleSwitches = base.attention.kind == AttentionKind::ReluLen &&
                                              change.ablation == Ablation::Uniform;
                    QCOMPARE(reused->reusedLayers, ruleSwitches ? int64_t(0) : k);
                    compareCaptures(*full, *reused, name);
                    if (QTest::currentTestFailed()) return;
                    QVERIFY(full->effect && reused->effect && full->lens && reused->lens);
                    const auto& a = *full->effect;
                    const auto& b = *reused->effect;
                    QCOMPARE(a.kl.size(), b.kl.size());
                    for (size_t i = 0; i < a.kl.size(); ++i) {
                        QVERIFY2(std::abs(a.kl[i] - b.kl[i]) < 1e-5 &&
                                     std::abs(a.deltaLogProb[i] - b.deltaLogProb[i]) < 1e-4,
                                 name);
                    }
                    QVERIFY2(std::abs(a.loss - b.loss) < 1e-5 &&
                                 std::abs(a.unchangedLoss - b.unchangedLoss) < 1e-5,
                             name);
                    // the change matters: it is not an empty run compared with itself
                    QVERIFY2(a.unchangedLoss != a.loss, name);
                    QVERIFY2(maxDifference(full->lens->nextTokenProbability,
                                           reused->lens->nextTokenProbability) < 1e-5,
                             name);
                }
            }
        }
        // Another FFN variant or other tokens: nothing is taken from below.
        CaptureRequest other = viewerRequest(everyVariant()[0], 0.1);
        std::shared_ptr<const CaptureMemory> memory;
        QVERIFY(capture(model, tokenizer, text, other, nullptr, nullptr, &memory).ok());
        CaptureRequest changed = other;
        AttentionOverride high;
        high.layer = 3;
        high.spec.kind = AttentionKind::ReluLen;
        changed.run.overrides = {high};
        auto elsewhere = capture(model, tokenizer, text + " more", changed, nullptr, memory.get());
        QVERIFY(elsewhere.ok());
        QCOMPARE(elsewhere->reusedLayers, int64_t(0));
        changed.run.ffn = FfnKind::Gelu;
        auto otherFfn = capture(model, tokenizer, text, changed, nullptr, memory.get());
        QVERIFY(otherFfn.ok());
        QCOMPARE(otherFfn->reusedLayers, int64_t(0));
    }

    void pooledMapTakesBlocksInAnyOrder() {
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
        QVERIFY(std::isnan(got[0][2].item<float>()));
        QCOMPARE(got[0][0].item<float>(), 14.0f);
        QCOMPARE(got[0][1].item<float>(), 15.0f);
        QCOMPARE(got[1][0].item<float>(), 32.0f);
        QCOMPARE(got[1][1].item<float>(), 34.0f);
        QCOMPARE(got[1][2].item<float>(), 36.0f);
        PooledMap mean(1, 0, 6, 0, 6, 2, 3, Pooling::Mean, torch::kCPU);
        mean.add(full, 0);
        // rows 3-5 × keys 4-5: visible 29 (row 4, key 4), 35, 36 (row 5) → 100 / 3
        QVERIFY(std::abs(mean.result()[0][1][2].item<float>() - 100.0f / 3) < 1e-5);
    }

    void badRegionsAreRefused() {
        CaptureRequest lazy;
        lazy.lazyMaps = true;
        auto r = capture(*tiny_->model, tiny_->tokenizer, "a short text", lazy);
        QVERIFY(r.ok());
        const auto& maps = *r->maps->lazy();
        QVERIFY_THROWS_EXCEPTION(std::out_of_range, maps.weights(5, 0));
        QVERIFY_THROWS_EXCEPTION(std::out_of_range, maps.weights(0, 0, 0, maps.tokens() + 1, 0, 1));
        QVERIFY_THROWS_EXCEPTION(std::out_of_range,
                                 maps.pooled(0, 9, 0, 1, 0, 1, 1, 1, Pooling::Max));
    }

    void everyMapAtOnceIsCappedButLazyIsNot() {
        std::string text;
        while (text.size() < 5000) text += text_;
        CaptureRequest full;
        full.allMaps = true;
        full.maxAllMapsTokens = 200;
        auto refused = capture(*tiny_->model, tiny_->tokenizer, text, full);
        QVERIFY(!refused.ok());
        QVERIFY2(QString::fromStdString(refused.error())
                     .contains("every map at once is kept for at most 200"),
                 refused.error().c_str());
        CaptureRequest lazy;
        lazy.lazyMaps = true;
        lazy.maxAllMapsTokens = 200;
        auto fine = capture(*tiny_->model, tiny_->tokenizer, text, lazy);
        QVERIFY2(fine.ok(), fine ? "" : fine.error().c_str());
        QVERIFY(fine->maps->lazy()->tokens() > 200);
    }
};

QTEST_GUILESS_MAIN(TestAttentionMaps)
#include "test_attention_maps.moc"
