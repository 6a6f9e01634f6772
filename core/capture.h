// One forward pass on a text, returning a value-type result: tokens, next-token predictions,
// per-layer diagnostics and whatever maps and activations the request asks for.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/attention_maps.h"
#include "core/diagnostics.h"
#include "core/error.h"
#include "core/growing_rows.h"
#include "core/language_model.h"
#include "core/map_source.h"
#include "core/predictions.h"
#include "core/tokenizer.h"

namespace relulens::core {

struct CaptureRequest {
    RunSpec run;
    std::vector<HeadRef> maps;    // heads whose weights (and scores) are returned
    bool allMaps = false;         // every head's weights (layers × heads × L × L floats)
    bool mapScores = true;        // raw scores alongside the requested maps
    bool lazyMaps = false;        // keep queries and keys so any map can be rebuilt (AttentionMaps)
    bool slotActivations = true;  // FFN memory-slot activations per layer
    bool diagnostics = true;
    int topK = 5;
    double tauScale = 0.1;       // softmax sparsity threshold τ_i = tauScale / n_i
    double sinkThreshold = 0.3;  // a head whose sink score passes this is a sink head (Gu et al.)
    // Attention runs in blocks of rows and maps are rebuilt on demand, so memory grows about
    // linearly with the input; time grows with its square.
    int64_t maxTokens = 16384;
    // Materialising every map at once (allMaps) costs layers × heads × L² floats.
    int64_t maxAllMapsTokens = 4096;
    int64_t blockRows = 0;  // attention rows per block; 0 chooses from the input length
    // Every head's map max-pooled to at most this many cells a side while the forward pass runs
    // (0: none), so that overviews and thumbnails of long inputs need no second pass.
    int64_t overviewCells = 0;
    // ... only for inputs longer than this: shorter maps are pooled faster when they are shown.
    int64_t overviewFromTokens = 2048;
    // A second forward without the run's overrides, and what they change at every token
    // (CaptureResult::effect; all zero when there are none).
    bool effect = false;
    // The logit lens (CaptureResult::lens), with the top-k of every layer at these positions
    // (-1: the last token).
    bool lens = false;
    std::vector<int64_t> lensPositions = {-1};
    bool lensEveryPosition = false;  // the top-k at every position instead (the window's Lens view)
    int64_t lensMaxTokens = 16384;   // longer texts get no lens (and keep their prefix reuse)
};

struct LayerCapture {
    AttentionDiagnostics attentionDiagnostics;
    ResidualDiagnostics residual;  // the stream entering the layer, with the diagnostics
    FfnDiagnostics ffn;
    torch::Tensor slotActivations;  // (L, d_ff) CPU float, when requested
};

// What a capture can keep (capture's memoryOut) so that the next capture, of a text whose tokens
// start with this one's (typing at the end, the common case), runs only the new tokens. The model
// is causal: the first tokens' keys, values, head outputs and FFN activations do not change when
// tokens are added after them. Opaque to the views.
struct CaptureMemory {
    const LanguageModel* model = nullptr;
    CaptureRequest request;
    std::vector<int64_t> ids;
    // Per layer: keys and values (1, H_kv, L, dh); queries and head outputs (H, L, dh);
    // FFN input, slot activations and output, and the residual stream entering the layer (L, ·).
    // A continuation writes its new rows after these in place when no other did (the results
    // and memories made before it see only their own first rows).
    std::vector<GrowingRows> keys, values, queries, headOutputs, ffnInput, slotActivations,
        ffnOutput, residual;
    // The diagnostics' and overviews' running state after the first `row` tokens. The last
    // tokens often change as a word is typed (a piece grows), so besides the state at the end a
    // checkpoint a few rows before it is kept, and a continuation starts from the later one
    // that its text still shares.
    struct Checkpoint {
        int64_t row = 0;
        std::vector<AttentionDiagnosticsAccumulator> accumulators;
        std::vector<PooledMap> overviews;
    };
    Checkpoint atEnd, beforeEnd;
    std::vector<std::vector<Prediction>> predictions;
    int64_t bytes() const;
    // Whether a capture of `model` with this request can take anything from this memory: the
    // first tokens of a text extended at the end, or the layers below a change of the same text
    // (the text itself is checked by capture). The window's comparison, captured under the
    // variant a toggle goes to, serves that toggle's capture all but its top layer.
    bool canServe(const LanguageModel& model, const CaptureRequest& request) const;
    // This memory with room after its rows for a continuation to write in place (a capture from
    // scratch has none, so its first continuation copies every row): each layer's tensors are
    // copied where they lack it, one at a time, until `stop` returns true.
    std::shared_ptr<const CaptureMemory> withRoom(const std::function<bool()>& stop) const;
    // Whether withRoom would copy anything (after a word written in place, nothing).
    bool needsRoom() const;
};

// What the run's overrides and ablations change, token by token: entry i is about predicting
// token i + 1 (L − 1 entries).
struct ChangeEffect {
    std::vector<double> deltaLogProb;  // log p_changed(t_i+1) − log p_unchanged(t_i+1)
    std::vector<double> kl;            // KL(p_unchanged ‖ p_changed) over the vocabulary, nats
    double loss = 0;           // mean −log p_changed(t_i+1): the text's loss with the change
    double unchangedLoss = 0;  // ... without it
    std::vector<std::vector<Prediction>> unchangedPredictions;  // per position, top-k without it
};

// The logit lens: the residual stream after each layer, through the final norm and the output
// embedding, read as next-token predictions.
struct LogitLens {
    torch::Tensor nextTokenProbability;  // (layers, L − 1) CPU float: p(t_i+1) after each layer
    struct At {
        int64_t position = 0;
        std::vector<std::vector<Prediction>> layers;  // top-k after each layer
    };
    std::vector<At> top;
};

struct CaptureResult {
    ModelInfo model;
    RunSpec run;
    bool trainedWithRun = false;  // the run's variants are the ones the weights were trained with
    std::string device;
    double tauScale = 0.1;
    double sinkThreshold = 0.3;
    std::vector<Token> tokens;
    std::vector<std::vector<Prediction>> predictions;  // per position, next-token top-k
    std::vector<LayerCapture> layers;
    std::shared_ptr<const MapSource> maps;  // every attention map the views and exports ask for
    double milliseconds = 0;                // forward pass and capture
    int64_t reusedTokens = 0;               // leading tokens taken from a previous capture's memory
    // Leading layers taken from a previous capture of the same tokens whose run differed only
    // higher up (an override or ablation set on a layer above them): only the rest ran.
    int64_t reusedLayers = 0;
    std::optional<ChangeEffect> effect;  // when asked for
    std::optional<LogitLens> lens;       // when asked for
};

bool sameVariants(const RunSpec& a, const RunSpec& b);

// What the window (and `relulens bench`, which times it) asks of a capture: maps on demand,
// slot activations, every diagnostic and the top 10 predictions.
CaptureRequest viewerRequest(const RunSpec& run, double tauScale);
// What a picture of attention maps alone needs (`relulens render --view attention|heads`):
// maps on demand and their overviews, without diagnostics or slot activations.
CaptureRequest mapsOnlyRequest(const RunSpec& run);

// Fails with a readable message on empty text, too many tokens, a bad head, a variant the
// model cannot run, or cancellation. With memoryOut (and no requested maps), what a capture of
// a longer text needs is kept there. With `previous` (the memory of an earlier capture of the
// same model and request), the tokens its text shares are taken from it and only the rest run;
// the result equals a capture without it. With `previous` of the same tokens and a run that
// differs only from some layer up (an override or ablation set there), the layers below it are
// taken from it instead.
Result<CaptureResult> capture(const LanguageModel& model, const Tokenizer& tokenizer,
                              const std::string& text, const CaptureRequest& request,
                              const std::atomic<bool>* cancel = nullptr,
                              const CaptureMemory* previous = nullptr,
                              std::shared_ptr<const CaptureMemory>* memoryOut = nullptr);

}  // namespace relulens::core
