// The per-head and per-layer diagnostics of PAPERS.md, computed from captured tensors.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "core/ffn.h"
#include "core/torch_include.h"
#include "core/variants.h"

namespace relulens::core {

// How sparsity is counted: ReLU-based weights count exact zeros; others (softmax, gelu,
// softplus, sigmoid) count entries below τ_i = tauScale / n_i, and every view names τ.
struct SparsityRule {
    bool exactZero = true;
    double tauScale = 0.1;
};

// The rule in words, the one wording every view, table and export uses: "exactly 0", or
// "below τ = 0.1 / n_i" where `per` is what τ is divided by ("n_i" for attention rows, "d_ff"
// for memory slots); `ascii` writes "tau" for terminals and CSV files.
std::string sparsityRuleText(const SparsityRule& rule, const std::string& per, bool ascii = false);

// Attention sinks (PAPERS.md, after Xiao et al. 2023 and Gu et al. 2024): how much of each row
// a head gives the first token, and what that token's key and value look like.
struct SinkDiagnostics {
    double firstTokenShare = 0;  // mean over rows i >= 1 with mass > 0 of α_i0 / Σ_j α_ij
    int64_t zeroMassRows = 0;    // rows i >= 1 without positive mass (an abstaining row is no sink)
    double sinkScore = 0;        // Gu et al.'s score of key 0: mean over rows i >= 0 of α_i0
    bool sinkHead = false;       // sinkScore > the capture's threshold ε (0.3 by default)
    // ||k_0|| and ||v_0|| of the kv head this head reads, and the means over the other tokens
    // (NaN for a one-token text).
    double firstKeyNorm = 0, otherKeyNorm = 0;
    double firstValueNorm = 0, otherValueNorm = 0;
};

struct HeadDiagnostics {
    double sparsity = 0;            // share of visible entries counted sparse
    double rowMass = 0;             // mean over rows of Σ_j α_ij
    double rowMassStd = 0;          // its spread over rows
    double entropy = 0;             // mean row entropy (nats) after normalising rows to sum 1
    double topShare = 0;            // mean share of row mass in the top entry
    double topOnePercentShare = 0;  // ... in the top ceil(1 % of n_i) entries
    double outputVariance = 0;      // variance of the head's output α·v
    int64_t emptyRows = 0;          // rows whose mass is exactly 0 (left out of entropy/top ratio)
    std::vector<double> distanceProfile;  // mean weight at query–key distance 0..L-1
    SinkDiagnostics sink;
};

// Massive activations (Sun et al. 2024) in the residual stream entering a layer.
struct ResidualPeak {
    double value = 0;  // signed
    int64_t token = 0, dimension = 0;
};
struct ResidualDiagnostics {
    std::vector<ResidualPeak> largest;  // the (up to) three largest |h|, largest first
    double medianAbs = 0;               // median |h| over every token and dimension
    double kurtosis = 0;  // E[(h − mean)⁴] / var² over every entry (3 for a Gaussian)
    double largestOverMedian() const {
        return largest.empty() || medianAbs <= 0 ? 0 : std::abs(largest[0].value) / medianAbs;
    }
};

struct VarianceBucket {
    int64_t nLow = 0, nHigh = 0;  // rows with nLow <= n_i <= nHigh (or slots 1..nHigh)
    double variance = 0;
};

struct AttentionDiagnostics {
    std::vector<HeadDiagnostics> heads;
    torch::Tensor rowSparsity;                      // (H, L) per query token
    torch::Tensor rowEntropy;                       // (H, L)
    torch::Tensor rowMass;                          // (H, L)
    std::vector<VarianceBucket> outputVarianceByN;  // mean over heads, power-of-two buckets of n
};

struct FfnDiagnostics {
    double sparsity = 0;  // share of slot activations counted sparse
    SparsityRule rule;    // exact zeros for relu; below tauScale / d_ff otherwise
    double outputVariance = 0;
    std::vector<VarianceBucket> outputVarianceBySlots;  // memory restricted to the first N slots
    torch::Tensor tokenSparsity;                        // (L)
};

SparsityRule attentionSparsityRule(const AttentionSpec& spec, double tauScale);
// With overrides: exact zeros only when every head of every layer counts them (a zeroed head
// does, a uniform one does not); otherwise τ_i for every head, which counts exact zeros too.
SparsityRule attentionSparsityRule(const RunSpec& run, int64_t layers, int64_t heads,
                                   double tauScale);

// Builds AttentionDiagnostics from blocks of query rows, so that no (H, L, L) map has to exist
// at once. Every block holds rows rowOffset..rowOffset+R-1 against keys 0..K-1 (K at least
// rowOffset + R); entries a row cannot see must be exactly zero, as attentionWeights makes them.
// window > 0: rows see only their last `window` keys (n_i = min(i + 1, window)).
class AttentionDiagnosticsAccumulator {
public:
    AttentionDiagnosticsAccumulator(int64_t heads, int64_t tokens, const SparsityRule& rule,
                                    const torch::Device& device, int64_t window = 0);
    // weights (H, R, K): heads headBegin..headBegin+H-1. Disjoint heads may be added from two
    // threads at once.
    void add(const torch::Tensor& weights, int64_t rowOffset, int64_t headBegin = 0);
    // CPU blocks take one fused pass per row (the default); false keeps the tensor path that
    // other devices use, so tests can compare the two.
    void setFused(bool fused) { fused_ = fused; }
    // headOutputs: (H, L, d_head) or undefined. Every row must have been added.
    AttentionDiagnostics finish(const torch::Tensor& headOutputs) const;
    // A deep copy for an input of `tokens` tokens that starts with this one's tokens: what the
    // rows added so far contributed is kept, and the remaining rows are added to the copy.
    AttentionDiagnosticsAccumulator resized(int64_t tokens) const;

private:
    void addRows(const torch::Tensor& weights, int64_t rowOffset, int64_t headBegin);  // CPU

    int64_t heads_, tokens_, window_;
    bool fused_ = true;
    SparsityRule rule_;
    torch::Tensor sparseCount_, mass_, entropy_, top1_, topPct_;  // (H, L)
    torch::Tensor distanceSums_;                                  // (H, L)
    torch::Tensor first_;                                         // (H, L) α_i0
};

// stream: (L, d), the residual stream entering a layer.
ResidualDiagnostics residualDiagnostics(const torch::Tensor& stream);

// Fills each head's sink key and value norms and its sink flag: keys and values (H_kv, L, d_head)
// (query head h reads kv head h / (H / H_kv)); a sink head has a sink score above `threshold`.
void completeSinkDiagnostics(std::vector<HeadDiagnostics>& heads, const torch::Tensor& keys,
                             const torch::Tensor& values, double threshold);

// weights: (H, L, L) causal; headOutputs: (H, L, d_head) or undefined.
AttentionDiagnostics attentionDiagnostics(const torch::Tensor& weights,
                                          const torch::Tensor& headOutputs,
                                          const SparsityRule& rule);

// ffnInput: (L, d) layer-normed input; slots: (L, d_ff) activations; output: (L, d) what the
// block added when the forward pass kept it (else it is computed). The variance against the
// number of slots is taken over at most kSlotCurveTokens evenly spaced tokens.
constexpr int64_t kSlotCurveTokens = 128;
FfnDiagnostics ffnDiagnostics(const torch::Tensor& ffnInput, const torch::Tensor& slots,
                              const FfnWeights& weights, FfnKind kind, double tauScale,
                              const torch::Tensor& output = {});

// The same for a gated memory: slots (L, d_ff) are act(gate·x) ⊙ up·x; kind is the gate's
// activation (exact zeros for relu, below tauScale / d_ff otherwise). output: (L, d) the block's
// output when the forward pass kept it (else it is computed). The variance against the number
// of slots is taken over at most kSlotCurveTokens evenly spaced tokens (the curve costs a whole
// FFN product per token; on a 1.1 B-parameter model, seconds per pass otherwise).
FfnDiagnostics gatedFfnDiagnostics(const torch::Tensor& slots, const torch::Tensor& output,
                                   const GatedFfnWeights& weights, FfnKind kind, double tauScale);

}  // namespace relulens::core
