// Names and parsing of the attention and FFN variants of PAPERS.md.
// A RunSpec says which variant one forward pass uses; it may differ from what the model was
// trained with (that is part of the model's config).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace relulens::core {

// The papers' variants first (Shen et al. 2023, Wortsman et al. 2023), then the later ones of
// PAPERS.md's "Beyond the two papers".
enum class AttentionKind {
    Softmax,
    Relu,
    ReluLen,
    ReluFormer,
    Family,
    Sigmoid,
    Softpick,
    Softmax1,
    Sparsemax,
    Entmax15,
    Ssmax,
    StickBreaking
};
enum class FamilyFunction { Relu, Relu2, Gelu, Softplus, Sigmoid };
// Silu and GeluTanh are the gate activations of gated (Hugging Face) FFNs.
enum class FfnKind { Relu, Gelu, Softmax, SoftmaxLn, Silu, GeluTanh };

struct AttentionSpec {
    AttentionKind kind = AttentionKind::Softmax;
    FamilyFunction familyFunction =
        FamilyFunction::Relu;     // h of Family: h(s) / n^a; used by Family only
    double lengthExponent = 1.0;  // a, the length exponent of ReluLen and Family, in [0, 2]
    // Sigmoid's bias b in sigma(s + b): unset means b_i = -log n_i (Ramapuram et al.'s choice).
    std::optional<double> sigmoidBias;
    double ssmaxSigma = kDefaultSsmaxSigma;  // Ssmax's scale: softmax(sigma * log n_i * s)

    static constexpr double kDefaultSsmaxSigma = 0.43;

    // "softmax", "relu", "relu_len", "reluformer", "family", "sigmoid", "softpick", ...
    std::string name() const;
    // Human label including the constants where they differ from the defaults, e.g.
    // "family(relu2, a=0.50)", "ssmax(sigma=0.60)", "sigmoid(b=-2.00)".
    std::string label() const;
    // True when entries can be exactly zero (ReLU-based), so sparsity counts exact zeros.
    bool hasExactZeros() const;
    bool operator==(const AttentionSpec& other) const;
    bool operator!=(const AttentionSpec& other) const { return !(*this == other); }
};

// Switching a head off: its output becomes 0 (Zero), or it attends equally to every key it can
// see (Uniform: 1 / n_i each).
enum class Ablation { None, Zero, Uniform };

// A different attention for one layer (head = -1) or one head of one layer: a variant, or an
// ablation.
struct AttentionOverride {
    int64_t layer = 0;
    int64_t head = -1;
    AttentionSpec spec;  // used when ablation is None
    Ablation ablation = Ablation::None;

    // "2=relu_len", "1:3=sparsemax", "1:2=zero", "0:1=uniform": what --override/--ablate take.
    std::string label() const;
    bool operator==(const AttentionOverride& other) const;
    bool operator!=(const AttentionOverride& other) const { return !(*this == other); }
};

// What one head of one layer runs.
struct HeadAttention {
    AttentionSpec spec;
    Ablation ablation = Ablation::None;
    bool operator==(const HeadAttention& other) const;
    bool operator!=(const HeadAttention& other) const { return !(*this == other); }
};

struct RunSpec {
    AttentionSpec attention;
    FfnKind ffn = FfnKind::Relu;
    // Overrides stack on `attention`: one for a head beats one for its layer, and among those
    // of the same reach the later one wins.
    std::vector<AttentionOverride> overrides;

    HeadAttention headAttention(int64_t layer, int64_t head) const;
    // Whether any override names this layer (else every head runs `attention`).
    bool overridesLayer(int64_t layer) const;
    // The same run with no overrides: what the effect of a change is measured against.
    RunSpec withoutOverrides() const;
};

// Every attention kind, in the order menus and help list them.
const std::vector<AttentionKind>& attentionKinds();
// Every function h of the ReLU family, in the order menus and help list them.
const std::vector<FamilyFunction>& familyFunctions();
// True for the variants of the two papers (softmax, relu, relu_len, reluformer, family).
bool isPapersVariant(AttentionKind kind);
// "softmax | relu | ... | stickbreaking", for help and error messages.
std::string attentionKindList();

Result<AttentionKind> parseAttentionKind(const std::string& name);
Result<FamilyFunction> parseFamilyFunction(const std::string& name);
Result<FfnKind> parseFfnKind(const std::string& name);
Status validateAttentionSpec(const AttentionSpec& spec);
// "L[:H]=VARIANT" (a variant by name, with its default constants) and "L:H[=zero|uniform]"
// (zero when the mode is left out). Layers and heads count from 0.
Result<AttentionOverride> parseOverride(const std::string& text);
Result<AttentionOverride> parseAblation(const std::string& text);
// Every override names a layer and head the model has.
Status validateOverrides(const RunSpec& run, int64_t layers, int64_t heads);

std::string attentionKindName(AttentionKind kind);
std::string familyFunctionName(FamilyFunction h);
std::string ffnKindName(FfnKind kind);

}  // namespace relulens::core
