// Names and parsing of the attention and FFN variants of PAPERS.md.
// A RunSpec says which variant one forward pass uses; it may differ from what the model was
// trained with (that is part of the model's config).
#pragma once
#include <string>

#include "core/error.h"

namespace relulens::core {

enum class AttentionKind { Softmax, Relu, ReluLen, ReluFormer, Family };
enum class FamilyFunction { Relu, Relu2, Gelu, Softplus, Sigmoid };
// Silu and GeluTanh are the gate activations of gated (Hugging Face) FFNs.
enum class FfnKind { Relu, Gelu, Softmax, SoftmaxLn, Silu, GeluTanh };

struct AttentionSpec {
    AttentionKind kind = AttentionKind::Softmax;
    FamilyFunction h = FamilyFunction::Relu;  // used by Family only
    double a = 1.0;                           // length exponent of ReluLen and Family, in [0, 2]

    // "softmax", "relu", "relu_len", "reluformer", "family".
    std::string name() const;
    // Human label including h and a where they matter, e.g. "family(relu2, a=0.50)".
    std::string label() const;
    // True when entries can be exactly zero (ReLU-based), so sparsity counts exact zeros.
    bool hasExactZeros() const;
    bool operator==(const AttentionSpec& other) const;
    bool operator!=(const AttentionSpec& other) const { return !(*this == other); }
};

struct RunSpec {
    AttentionSpec attention;
    FfnKind ffn = FfnKind::Relu;
};

Result<AttentionKind> parseAttentionKind(const std::string& name);
Result<FamilyFunction> parseFamilyFunction(const std::string& name);
Result<FfnKind> parseFfnKind(const std::string& name);
Status validateAttentionSpec(const AttentionSpec& spec);

std::string attentionKindName(AttentionKind kind);
std::string familyFunctionName(FamilyFunction h);
std::string ffnKindName(FfnKind kind);

}  // namespace relulens::core
