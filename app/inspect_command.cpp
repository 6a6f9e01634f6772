#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/commands.h"
#include "core/atomic_file.h"
#include "core/capture.h"
#include "core/capture_json.h"
#include "core/checkpoint.h"
#include "core/device.h"

namespace relulens::app {

namespace {

core::Result<std::vector<core::HeadRef>> parseMaps(const std::string& text) {
    std::vector<core::HeadRef> refs;
    std::stringstream stream(text);
    std::string item;
    while (std::getline(stream, item, ',')) {
        const auto colon = item.find(':');
        try {
            if (colon == std::string::npos) throw std::invalid_argument("no colon");
            size_t used = 0;
            const auto layer = std::stoll(item.substr(0, colon), &used);
            if (used != colon) throw std::invalid_argument("layer");
            const auto headText = item.substr(colon + 1);
            const auto head = std::stoll(headText, &used);
            if (used != headText.size()) throw std::invalid_argument("head");
            refs.push_back({layer, head});
        } catch (const std::exception&) {
            return core::Error{"--maps expects LAYER:HEAD[,LAYER:HEAD...], got '" + item + "'"};
        }
    }
    if (refs.empty()) return core::Error{"--maps needs at least one LAYER:HEAD"};
    return refs;
}

std::string visible(const std::string& piece) {
    std::string out;
    for (char c : piece) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else
            out += c;
    }
    return out;
}

void printSummary(const core::CaptureResult& r) {
    const auto& m = r.model;
    std::string kv;
    if (m.nKvHeads != m.nHeads) kv = " (" + std::to_string(m.nKvHeads) + " kv heads)";
    std::printf(
        "model    %s (%s): %lld layers × %lld heads%s, d_model %lld, d_ff %lld%s, vocab %lld, "
        "trained with attention %s, FFN %s\n",
        m.name.c_str(), m.family.c_str(), (long long)m.nLayers, (long long)m.nHeads, kv.c_str(),
        (long long)m.dModel, (long long)m.dFf, m.gatedFfn ? " (gated)" : "", (long long)m.vocabSize,
        m.trained.attention.label().c_str(), core::ffnKindName(m.trained.ffn).c_str());
    for (const auto& o : r.run.overrides) std::printf("override %s\n", o.label().c_str());
    std::printf("run      attention %s, FFN %s on %s (%s)\n", r.run.attention.label().c_str(),
                core::ffnKindName(r.run.ffn).c_str(), r.device.c_str(),
                r.trainedWithRun ? "the variants it was trained with"
                                 : "NOT the variants it was trained with");
    std::printf("tokens   %zu:", r.tokens.size());
    const size_t shown = std::min<size_t>(r.tokens.size(), 40);
    for (size_t i = 0; i < shown; ++i) std::printf(" %s", visible(r.tokens[i].piece).c_str());
    if (shown < r.tokens.size()) std::printf(" … (%zu more)", r.tokens.size() - shown);
    std::printf("\n");
    const auto rule = core::attentionSparsityRule(r.run, m.nLayers, m.nHeads, r.tauScale);
    std::printf("sparsity share of visible attention weights %s\n",
                core::sparsityRuleText(rule, "n_i", true).c_str());
    std::printf(
        "first    the first token's share of each row with mass; sink: sink score "
        "(mean weight on the first token) > %g\n",
        r.sinkThreshold);
    std::printf("%-6s %-5s %9s %9s %9s %9s %9s\n", "layer", "head", "sparsity", "entropy",
                "row mass", "top-1", "first");
    int64_t sinkHeads = 0, heads = 0;
    for (size_t l = 0; l < r.layers.size(); ++l) {
        const auto& layer = r.layers[l];
        for (size_t h = 0; h < layer.attentionDiagnostics.heads.size(); ++h) {
            const auto& d = layer.attentionDiagnostics.heads[h];
            std::printf("%-6zu %-5zu %9.3f %9.3f %9.3f %9.3f %9.3f%s\n", l, h, d.sparsity,
                        d.entropy, d.rowMass, d.topShare, d.sink.firstTokenShare,
                        d.sink.sinkHead ? "  sink" : "");
            sinkHeads += d.sink.sinkHead;
            ++heads;
        }
        std::printf("%-6zu %-5s %9.3f   (FFN memory slots, %s)\n", l, "ffn", layer.ffn.sparsity,
                    core::sparsityRuleText(layer.ffn.rule, "d_ff", true).c_str());
    }
    if (heads > 0) {
        std::printf("sinks    %lld of %lld heads (%.0f %%)\n", (long long)sinkHeads,
                    (long long)heads, 100.0 * double(sinkHeads) / double(heads));
    }
    for (size_t l = 0; l < r.layers.size(); ++l) {
        const auto& res = r.layers[l].residual;
        if (res.largest.empty()) continue;
        const auto& top = res.largest[0];
        std::printf(
            "residual layer %zu in: largest |h| %.3g (token %lld, dim %lld) = %.1f × median "
            "%.3g, kurtosis %.1f\n",
            l, std::abs(top.value), (long long)top.token, (long long)top.dimension,
            res.largestOverMedian(), res.medianAbs, res.kurtosis);
    }
    if (!r.predictions.empty()) {
        std::printf("next     after '%s':", visible(r.tokens.back().piece).c_str());
        for (const auto& p : r.predictions.back()) {
            std::printf(" %s %.3f", visible(p.piece).c_str(), p.probability);
        }
        std::printf("\n");
    }
    if (r.effect && !r.effect->kl.empty()) {
        const auto& e = *r.effect;
        size_t most = 0;
        for (size_t i = 1; i < e.kl.size(); ++i) {
            if (e.kl[i] > e.kl[most]) most = i;
        }
        std::printf(
            "effect   text loss %.4f without the overrides, %.4f with them (%+.4f nats); largest "
            "change predicting token %zu '%s': KL %.4f, log p %+.4f\n",
            e.unchangedLoss, e.loss, e.loss - e.unchangedLoss, most + 1,
            visible(r.tokens[most + 1].piece).c_str(), e.kl[most], e.deltaLogProb[most]);
    }
    if (r.lens) {
        for (const auto& at : r.lens->top) {
            std::printf("lens     after '%s' (token %lld), layer by layer:\n",
                        visible(r.tokens[size_t(at.position)].piece).c_str(),
                        (long long)at.position);
            for (size_t l = 0; l < at.layers.size(); ++l) {
                std::printf("         layer %zu:", l);
                for (const auto& p : at.layers[l])
                    std::printf(" %s %.3f", visible(p.piece).c_str(), p.probability);
                std::printf("\n");
            }
        }
    }
    std::printf("time     %.1f ms\n", r.milliseconds);
}

}  // namespace

int inspectCommand(const std::vector<std::string>& argv) {
    auto args = Arguments::parse(argv, withVariantOptions({{"model"},
                                                           {"text"},
                                                           {"file"},
                                                           {"device"},
                                                           {"json"},
                                                           {"maps"},
                                                           {"top-k"},
                                                           {"tau"},
                                                           {"sink-threshold"},
                                                           {"all-maps", false},
                                                           {"override", true, true},
                                                           {"ablate", true, true},
                                                           {"lens-at", true, true}}));
    if (!args) return fail(args.error());
    if (!args->has("model")) return fail("inspect needs --model DIR");
    auto text = textFromArguments(*args);
    if (!text) return fail(text.error());
    auto loaded = openModel(args->value("model"), args->value("device", "auto"));
    if (!loaded) return fail(loaded.error());

    core::CaptureRequest request;
    auto run = runSpecFromArguments(*args, loaded->model->info().trained);
    if (!run) return fail(run.error());
    request.run = *run;
    if (args->has("maps")) {
        auto maps = parseMaps(args->value("maps"));
        if (!maps) return fail(maps.error());
        request.maps = *maps;
    }
    request.allMaps = args->has("all-maps");
    auto topK = args->integer("top-k", 5);
    if (!topK) return fail(topK.error());
    if (*topK < 1 || *topK > 100) return fail("--top-k must be between 1 and 100");
    request.topK = int(*topK);
    auto tau = args->number("tau", 0.1);
    if (!tau) return fail(tau.error());
    if (!(*tau > 0) || *tau > 1) return fail("--tau must be in (0, 1]");
    request.tauScale = *tau;
    auto sink = args->number("sink-threshold", 0.3);
    if (!sink) return fail(sink.error());
    if (!(*sink > 0) || *sink >= 1) return fail("--sink-threshold must be in (0, 1)");
    request.sinkThreshold = *sink;
    request.effect = !request.run.overrides.empty();
    request.lens = true;
    if (args->has("lens-at")) {
        request.lensPositions.clear();
        for (const auto& text : args->values("lens-at")) {
            char* end = nullptr;
            const long long p = std::strtoll(text.c_str(), &end, 10);
            if (text.empty() || *end != '\0')
                return fail("--lens-at expects token positions (0, 1, …; -1 for the last), got '" +
                            text + "'");
            request.lensPositions.push_back(p);
        }
    }
    request.slotActivations = false;

    auto result = core::capture(*loaded->model, loaded->tokenizer, *text, request);
    if (!result) return fail(result.error());
    printSummary(*result);
    if (args->has("json")) {
        const std::string path = args->value("json");
        if (auto s = core::writeTextAtomically(path, core::captureToJson(*result).dump() + "\n");
            !s) {
            return fail(s.error());
        }
        std::printf("json     written to %s\n", path.c_str());
    }
    return 0;
}

}  // namespace relulens::app
