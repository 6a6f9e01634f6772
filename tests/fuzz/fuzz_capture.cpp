// Fuzz target: text → tokens → capture on the tiny model of tests/data. The first byte of an
// input picks the variants and the request; the rest is the text. Capture must give a result
// or an error message, never crash, hang or leak, and a result must be consistent: token spans
// inside the text, one prediction list per token, every layer and requested map present, the
// text decoded back from the tokens when it is UTF-8, and the JSON of `inspect --json`.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/capture.h"
#include "core/capture_json.h"
#include "core/checkpoint.h"
#include "core/device.h"
#include "tests/fuzz/fuzz_support.h"

using namespace relulens::core;
using relulens::fuzz::fail;

namespace {

const LoadedModel& tinyModel() {
    static const LoadedModel* model = [] {
        configureThreads();
        auto loaded = loadModelFolder(std::string(RELULENS_TEST_DATA) + "/tiny");
        if (!loaded) fail(loaded.error());
        return new LoadedModel(std::move(*loaded));
    }();
    return *model;
}

// The request an input's first byte selects: attention and FFN variant, length exponent,
// family function, which maps, and now and then a token cap the text may exceed.
CaptureRequest requestFor(uint8_t selector, const ModelInfo& config) {
    static const FfnKind kFfns[] = {FfnKind::Relu, FfnKind::Gelu, FfnKind::Softmax,
                                    FfnKind::SoftmaxLn};
    static const double kExponents[] = {0.0, 0.5, 1.0, 2.0};
    const auto& kinds = attentionKinds();  // the papers' variants and the later ones
    const int count = int(kinds.size());
    CaptureRequest request;
    request.run.attention.kind = kinds[size_t(selector % count)];
    request.run.ffn = kFfns[(selector / count) % 4];
    const int rest = selector / (count * 4);  // 0..5
    request.run.attention.lengthExponent = kExponents[rest % 4];
    request.run.attention.familyFunction = FamilyFunction(rest % 5);
    request.allMaps = rest % 2 == 1;
    if (rest >= 3) request.maps.push_back({config.nLayers - 1, rest % config.nHeads});
    if (rest == 5) request.maxTokens = 8;
    return request;
}

bool isUtf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80           ? 1
                         : (c >> 5) == 0x6  ? 2
                         : (c >> 4) == 0xE  ? 3
                         : (c >> 3) == 0x1E ? 4
                                            : 0;
        if (n == 0 || i + n > s.size()) return false;
        uint32_t code = n == 1 ? c : c & (0x7F >> n);
        for (size_t k = 1; k < n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d >> 6) != 0x2) return false;
            code = (code << 6) | (d & 0x3F);
        }
        const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
        if (code < least[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
        i += n;
    }
    return true;
}

void checkResult(const CaptureResult& r, const CaptureRequest& request, const std::string& text,
                 const LoadedModel& loaded) {
    const auto& config = loaded.model->info();
    const auto L = int64_t(r.tokens.size());
    if (L == 0 || L > request.maxTokens) fail("token count outside [1, maxTokens]");
    size_t previousStart = 0;
    for (const auto& t : r.tokens) {
        if (t.start > t.end || t.end > text.size()) {
            fail("token span [" + std::to_string(t.start) + ", " + std::to_string(t.end) +
                 ") lies outside the " + std::to_string(text.size()) + "-byte text");
        }
        if (t.start < previousStart) fail("token spans go backwards");
        previousStart = t.start;
    }
    if (r.predictions.size() != r.tokens.size()) fail("not one prediction list per token");
    for (const auto& top : r.predictions) {
        if (int64_t(top.size()) != std::min<int64_t>(request.topK, config.vocabSize)) {
            fail("wrong number of predictions");
        }
        for (const auto& p : top) {
            if (p.id < 0 || p.id >= config.vocabSize || !(p.probability >= 0.0) ||
                !(p.probability <= 1.0)) {
                fail("prediction outside the vocabulary or not a probability");
            }
        }
    }
    if (int64_t(r.layers.size()) != config.nLayers) fail("not one capture per layer");
    for (const auto& layer : r.layers) {
        if (int64_t(layer.attentionDiagnostics.heads.size()) != config.nHeads)
            fail("heads missing");
    }
    const size_t expectedMaps =
        request.allMaps ? size_t(config.nLayers * config.nHeads) : request.maps.size();
    if (r.maps->requested().size() != expectedMaps) fail("wrong number of maps");
    for (const auto& m : r.maps->requested()) {
        if (m.weights.sizes() != torch::IntArrayRef({L, L})) fail("a map has the wrong shape");
    }
    if (isUtf8(text)) {
        std::vector<int64_t> ids;
        for (const auto& t : r.tokens) ids.push_back(t.id);
        if (loaded.tokenizer.decode(ids) != text) fail("decode(encode(text)) != text");
    }
    // The JSON of every map grows as L²; its code does not depend on L, so short texts serve.
    if (L <= 64) (void)captureToJson(r).dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const LoadedModel& loaded = tinyModel();
    if (size == 0) return 0;
    const CaptureRequest request = requestFor(data[0], loaded.model->info());
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    auto result = capture(*loaded.model, loaded.tokenizer, text, request);
    if (result) checkResult(*result, request, text, loaded);
    return 0;
}
