// The one interface every model family implements. Capture, diagnostics, maps, evaluation and
// the views use a LanguageModel without knowing which family they hold: ReluLens's own
// (transformer.h) or the Hugging Face decoder families (llama_model.h).
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/diagnostics.h"
#include "core/error.h"
#include "core/model_info.h"
#include "core/torch_include.h"
#include "core/variants.h"

namespace relulens::core {

// What a forward pass keeps of each layer. Tensors keep the batch dimension B.
struct TraceOptions {
    bool scores = false;       // raw q·k·scale, masked entries included
    bool weights = false;      // attention weights after the activation
    bool headOutputs = false;  // per-head attention output α·v
    bool queriesKeys = false;  // q and k after rotary, enough to rebuild any map
    bool values = false;       // v: with k, what a longer input sharing this start reuses
    bool ffn = false;          // FFN input and slot activations
    bool rowMass = false;      // Σ_j α_ij, for the ReLUFormer regulariser
    bool residual = false;     // the residual stream entering each layer
};

struct LayerTrace {
    torch::Tensor scores;       // (B, H, L, L)
    torch::Tensor weights;      // (B, H, L, L)
    torch::Tensor headOutputs;  // (B, H, L, d_head)
    torch::Tensor q;            // (B, H, L, d_head)
    torch::Tensor k;            // (B, H_kv, L, d_head): query head h reads kv head h / (H / H_kv)
    torch::Tensor v;            // (B, H_kv, L, d_head)
    torch::Tensor ffnInput;     // (B, L, d) normed input of the FFN
    torch::Tensor slotActivations;  // (B, L, d_ff) memory-slot coefficients
    torch::Tensor ffnOutput;        // (B, L, d) what the FFN adds to the residual stream
    torch::Tensor rowMass;          // (B, H, L)
    torch::Tensor residual;         // (B, L, d) the residual stream entering the layer
};

struct ForwardTrace {
    TraceOptions options;
    std::vector<LayerTrace> layers;
    // Attention runs over blocks of query rows, each against only the keys it can see, so no
    // (L, L) map exists unless scores or weights are traced. When set, every block of weights
    // (B, H', R, K) of heads headBegin..headBegin+H'-1, rows rowOffset..rowOffset+R-1 and keys
    // 0..K-1 is handed here. On a CPU with two cores the heads come in two parts, one of them
    // from a helper thread, at once: each part's blocks of rows come one after the other, but
    // the two parts may be at different blocks. A block is valid only during the call (the
    // next block may be written in its place).
    std::function<void(int64_t layer, int64_t rowOffset, int64_t headBegin,
                       const torch::Tensor& weights)>
        onAttentionBlock;
    int64_t blockRows = 0;  // rows per block; 0 chooses from the input length
    // When splitRow > 0, no block holds rows on both sides of it, and onSplitRow(layer) is called
    // (on the thread that called forward()) when every row before it has been handed over.
    int64_t splitRow = 0;
    std::function<void(int64_t layer)> onSplitRow;
    // Polled between blocks, on a CPU with two cores by both parts' threads at once (so it must
    // be safe to call from two threads); when it returns true the pass stops and forward()
    // returns an undefined tensor.
    std::function<bool()> cancelled;
    // Keys and values (B, H_kv, P, d_head) per layer of the first P tokens of the input, from an
    // earlier pass. When set, forward() takes only the tokens after them (positions P on) and
    // returns their logits; q, head outputs and FFN tensors are traced for those rows only,
    // k and v for all P + L. The model is causal, so the result equals a pass over the whole.
    std::vector<torch::Tensor> pastKeys, pastValues;
    int64_t pastLength() const { return pastKeys.empty() ? 0 : pastKeys[0].size(2); }
    // Optionally (B, H_kv, P + L, d_head) per layer whose first P rows are the past keys
    // (values), P = 0 without pastKeys: the new rows are written after them and attention reads
    // them there, instead of joining past and new rows into a fresh tensor.
    std::vector<torch::Tensor> keyRoom, valueRoom;
    // When set, a layer's traced q, head outputs, FFN input, slot activations, FFN output and
    // residual stream are handed here as soon as the pass makes them, and the trace keeps what
    // it returns (a tensor of the same shape): the caller's copy, in a storage with room for the
    // words typed next, so the pass's own tensor is freed at once instead of being copied later.
    std::function<torch::Tensor(int64_t layer, torch::Tensor LayerTrace::*rows,
                                const torch::Tensor& fresh)>
        keepRows;
    // What the model calls to trace `fresh` as layer `layer`'s `rows`.
    void keep(int64_t layer, torch::Tensor LayerTrace::*rows, const torch::Tensor& fresh);
    // Start at layer startLayer from the residual stream entering it (B, L, d), from an earlier
    // pass over the same tokens whose run is the same below that layer (a change made higher in
    // the model). The layers before it are neither run nor traced. Not combined with pastKeys.
    int64_t startLayer = 0;
    torch::Tensor startResidual;
    // With options.residual: the stream after the last layer, before the final norm (B, L, d).
    torch::Tensor finalResidual;
    // When set, forward() returns that stream (B, L, d) instead of the logits, so a caller that
    // needs only a little of each row's logits can take them a block of rows at a time
    // (logitsFromResidual): 8,192 rows × 4,096 tokens of logits are 134 MB at once.
    bool stopBeforeLogits = false;
};

class LanguageModel {
public:
    virtual ~LanguageModel() = default;

    virtual const ModelInfo& info() const = 0;
    // ids: (B, L) int64 -> logits (B, L, vocab). Refuses nothing: check supports() first.
    virtual torch::Tensor forward(const torch::Tensor& ids, const RunSpec& run,
                                  ForwardTrace* trace = nullptr) const = 0;
    // Whether this model can run with these variants (a message saying why not).
    virtual Status supports(const RunSpec& run) const;

    // What a layer's attention needs to rebuild maps from queries and keys.
    virtual torch::Tensor attentionGamma(int64_t layer) const = 0;  // (H) ReLUFormer scale
    double attentionScale() const;                                  // 1 / sqrt(d_head)

    // The FFN diagnostics of one layer from what the forward pass traced.
    // input: (L, d), slots: (L, d_ff), output: (L, d).
    virtual FfnDiagnostics ffnDiagnostics(int64_t layer, const torch::Tensor& input,
                                          const torch::Tensor& slots, const torch::Tensor& output,
                                          FfnKind kind, double tauScale) const = 0;
    // What memory slot i of a layer writes: column i of (d, d_ff).
    virtual torch::Tensor slotValues(int64_t layer) const = 0;
    virtual torch::Tensor outputEmbedding() const = 0;  // (vocab, d)
    // The final norm and the output layer on a residual stream (..., d): what forward() does
    // after the last layer, so that the logit lens reads every layer the same way.
    virtual torch::Tensor logitsFromResidual(const torch::Tensor& stream) const = 0;

    virtual torch::Device device() const = 0;
    virtual void to(const torch::Device& device) = 0;
};

// Rows per attention block: the whole input when it is short, otherwise as many rows (at least
// 64) as keep one block of all heads' weights near a quarter-million floats.
int64_t attentionBlockRows(int64_t heads, int64_t tokens);

// Causal attention of one layer over blocks of query rows, for every family.
// q: (B, H, R, dh), rows at positions P..P+R-1 where P = L - R; k, v: (B, H_kv, L, dh) (H a
// multiple of H_kv); gamma: (H).
// Each head runs what run.headAttention(layer, head) says.
// window > 0 limits each row to its last `window` keys. Fills the layer's scores, weights and
// row mass when the trace asks, and hands each block to trace->onAttentionBlock. A pass that
// asks for none of these (no trace, or one that keeps only the residual stream, the FFN or the
// keys and values) runs fusedAttention (fused_attention.h) where it applies.
// Returns (B, H, R, dh), or an undefined tensor when the trace's cancel poll says so.
torch::Tensor blockedAttention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const RunSpec& run,
                               const torch::Tensor& gamma, double scale, int64_t window,
                               int64_t layer, ForwardTrace* trace);
// A layer's keys and values (B, H_kv, L, dh) for the new rows, preceded by the trace's past
// ones when it has them.
std::pair<torch::Tensor, torch::Tensor> withPast(const ForwardTrace* trace, int64_t layer,
                                                 const torch::Tensor& k, const torch::Tensor& v);
// Puts what a layer's pass made into the trace, as far as its options ask: the head outputs,
// queries, keys and values (k and v with the past, as withPast returned them), and the FFN's
// input, slot activations and output.
void keepLayer(ForwardTrace& trace, int64_t layer, const torch::Tensor& q, const torch::Tensor& k,
               const torch::Tensor& v, const torch::Tensor& headOutputs,
               const torch::Tensor& ffnInput, const torch::Tensor& slots,
               const torch::Tensor& ffnOutput);

// Rotary position embedding in rotate-half order on (..., L, d_head), positions
// offset..offset+L-1, from per-pair inverse frequencies (d_head / 2).
torch::Tensor applyRotary(const torch::Tensor& x, int64_t offset,
                          const torch::Tensor& inverseFrequencies);
// θ^(-2i/d) for i < d/2.
torch::Tensor ropeFrequencies(int64_t headDim, double base);

// The rotary angles' cosines and sines (L, d_head / 2) for positions offset..offset+L-1, made
// once for a whole pass: its blocks of rows rotate with rotateInto instead of each making them.
struct RotaryTable {
    torch::Tensor cos, sin;
};
RotaryTable rotaryTable(int64_t offset, int64_t L, const torch::Tensor& inverseFrequencies,
                        const torch::TensorOptions& options);
// out = x (B, H, n, d_head) rotated as applyRotary does, with rows row0..row0+n-1 of the table;
// out has x's shape (a view is fine) and shares no memory with it. On the CPU in float, one
// pass with no temporaries, each entry computed as applyRotary's tensor form computes it.
void rotateInto(const torch::Tensor& x, const RotaryTable& table, int64_t row0, torch::Tensor out);

}  // namespace relulens::core
