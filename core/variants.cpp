#include "core/variants.h"

#include <cmath>
#include <cstdio>

namespace relulens::core {

std::string attentionKindName(AttentionKind kind) {
    switch (kind) {
        case AttentionKind::Softmax:
            return "softmax";
        case AttentionKind::Relu:
            return "relu";
        case AttentionKind::ReluLen:
            return "relu_len";
        case AttentionKind::ReluFormer:
            return "reluformer";
        case AttentionKind::Family:
            return "family";
        case AttentionKind::Sigmoid:
            return "sigmoid";
        case AttentionKind::Softpick:
            return "softpick";
        case AttentionKind::Softmax1:
            return "softmax1";
        case AttentionKind::Sparsemax:
            return "sparsemax";
        case AttentionKind::Entmax15:
            return "entmax15";
        case AttentionKind::Ssmax:
            return "ssmax";
        case AttentionKind::StickBreaking:
            return "stickbreaking";
    }
    return "?";
}

const std::vector<AttentionKind>& attentionKinds() {
    static const std::vector<AttentionKind> kinds = {
        AttentionKind::Softmax,    AttentionKind::Relu,     AttentionKind::ReluLen,
        AttentionKind::ReluFormer, AttentionKind::Family,   AttentionKind::Sigmoid,
        AttentionKind::Softpick,   AttentionKind::Softmax1, AttentionKind::Sparsemax,
        AttentionKind::Entmax15,   AttentionKind::Ssmax,    AttentionKind::StickBreaking};
    return kinds;
}

bool isPapersVariant(AttentionKind kind) {
    return kind == AttentionKind::Softmax || kind == AttentionKind::Relu ||
           kind == AttentionKind::ReluLen || kind == AttentionKind::ReluFormer ||
           kind == AttentionKind::Family;
}

std::string attentionKindList() {
    std::string list;
    for (auto kind : attentionKinds())
        list += (list.empty() ? "" : " | ") + attentionKindName(kind);
    return list;
}

const std::vector<FamilyFunction>& familyFunctions() {
    static const std::vector<FamilyFunction> functions = {
        FamilyFunction::Relu, FamilyFunction::Relu2, FamilyFunction::Gelu, FamilyFunction::Softplus,
        FamilyFunction::Sigmoid};
    return functions;
}

std::string familyFunctionName(FamilyFunction h) {
    switch (h) {
        case FamilyFunction::Relu:
            return "relu";
        case FamilyFunction::Relu2:
            return "relu2";
        case FamilyFunction::Gelu:
            return "gelu";
        case FamilyFunction::Softplus:
            return "softplus";
        case FamilyFunction::Sigmoid:
            return "sigmoid";
    }
    return "?";
}

std::string ffnKindName(FfnKind kind) {
    switch (kind) {
        case FfnKind::Relu:
            return "relu";
        case FfnKind::Gelu:
            return "gelu";
        case FfnKind::Softmax:
            return "softmax";
        case FfnKind::SoftmaxLn:
            return "softmax_ln";
        case FfnKind::Silu:
            return "silu";
        case FfnKind::GeluTanh:
            return "gelu_tanh";
    }
    return "?";
}

Result<AttentionKind> parseAttentionKind(const std::string& name) {
    for (auto kind : attentionKinds()) {
        if (attentionKindName(kind) == name) return kind;
    }
    return Error{"unknown attention variant '" + name + "' (expected " + attentionKindList() + ")"};
}

Result<FamilyFunction> parseFamilyFunction(const std::string& name) {
    std::string list;
    for (auto h : familyFunctions()) {
        if (familyFunctionName(h) == name) return h;
        list += (list.empty() ? "" : ", ") + familyFunctionName(h);
    }
    return Error{"unknown family function '" + name + "' (expected one of " + list + ")"};
}

Result<FfnKind> parseFfnKind(const std::string& name) {
    for (auto kind : {FfnKind::Relu, FfnKind::Gelu, FfnKind::Softmax, FfnKind::SoftmaxLn,
                      FfnKind::Silu, FfnKind::GeluTanh}) {
        if (ffnKindName(kind) == name) return kind;
    }
    return Error{"unknown FFN variant '" + name +
                 "' (expected relu, gelu, softmax, softmax_ln, or for gated FFNs silu, gelu, "
                 "gelu_tanh, relu)"};
}

Status validateAttentionSpec(const AttentionSpec& spec) {
    if (!std::isfinite(spec.lengthExponent) || spec.lengthExponent < 0.0 ||
        spec.lengthExponent > 2.0) {
        char buffer[96];
        std::snprintf(buffer, sizeof buffer, "length exponent a = %g is outside [0, 2]",
                      spec.lengthExponent);
        return Error{buffer};
    }
    if (spec.sigmoidBias &&
        (!std::isfinite(*spec.sigmoidBias) || std::fabs(*spec.sigmoidBias) > 50.0)) {
        char buffer[96];
        std::snprintf(buffer, sizeof buffer, "sigmoid bias b = %g is outside [-50, 50]",
                      *spec.sigmoidBias);
        return Error{buffer};
    }
    if (!std::isfinite(spec.ssmaxSigma) || spec.ssmaxSigma <= 0.0 || spec.ssmaxSigma > 10.0) {
        char buffer[96];
        std::snprintf(buffer, sizeof buffer, "ssmax scale sigma = %g is outside (0, 10]",
                      spec.ssmaxSigma);
        return Error{buffer};
    }
    return {};
}

std::string AttentionSpec::name() const {
    return attentionKindName(kind);
}

std::string AttentionSpec::label() const {
    char buffer[96];
    switch (kind) {
        case AttentionKind::ReluLen:
            if (lengthExponent == 1.0) return "relu_len";
            std::snprintf(buffer, sizeof buffer, "relu_len(a=%.2f)", lengthExponent);
            return buffer;
        case AttentionKind::Family:
            std::snprintf(buffer, sizeof buffer, "family(%s, a=%.2f)",
                          familyFunctionName(familyFunction).c_str(), lengthExponent);
            return buffer;
        case AttentionKind::Sigmoid:
            if (!sigmoidBias) return "sigmoid";
            std::snprintf(buffer, sizeof buffer, "sigmoid(b=%.2f)", *sigmoidBias);
            return buffer;
        case AttentionKind::Ssmax:
            if (ssmaxSigma == kDefaultSsmaxSigma) return "ssmax";
            std::snprintf(buffer, sizeof buffer, "ssmax(sigma=%.2f)", ssmaxSigma);
            return buffer;
        default:
            return name();
    }
}

bool AttentionSpec::hasExactZeros() const {
    switch (kind) {
        case AttentionKind::Relu:
        case AttentionKind::ReluLen:
        case AttentionKind::ReluFormer:
        case AttentionKind::Softpick:
        case AttentionKind::Sparsemax:
        case AttentionKind::Entmax15:
            return true;
        case AttentionKind::Family:
            return familyFunction == FamilyFunction::Relu ||
                   familyFunction == FamilyFunction::Relu2;
        default:
            return false;
    }
}

std::string AttentionOverride::label() const {
    std::string where = std::to_string(layer);
    if (head >= 0) where += ":" + std::to_string(head);
    switch (ablation) {
        case Ablation::Zero:
            return where + "=zero";
        case Ablation::Uniform:
            return where + "=uniform";
        case Ablation::None:
            break;
    }
    return where + "=" + spec.label();
}

bool AttentionOverride::operator==(const AttentionOverride& other) const {
    return layer == other.layer && head == other.head && ablation == other.ablation &&
           (ablation != Ablation::None || spec == other.spec);
}

bool HeadAttention::operator==(const HeadAttention& other) const {
    return ablation == other.ablation && (ablation != Ablation::None || spec == other.spec);
}

HeadAttention RunSpec::headAttention(int64_t layer, int64_t head) const {
    HeadAttention out{attention, Ablation::None};
    const AttentionOverride* layerWide = nullptr;
    const AttentionOverride* ownHead = nullptr;
    for (const auto& o : overrides) {
        if (o.layer != layer) continue;
        if (o.head < 0) layerWide = &o;
        if (o.head == head) ownHead = &o;
    }
    if (const auto* o = ownHead ? ownHead : layerWide) {
        out.spec = o->ablation == Ablation::None ? o->spec : attention;
        out.ablation = o->ablation;
    }
    return out;
}

bool RunSpec::overridesLayer(int64_t layer) const {
    for (const auto& o : overrides) {
        if (o.layer == layer) return true;
    }
    return false;
}

RunSpec RunSpec::withoutOverrides() const {
    RunSpec out = *this;
    out.overrides.clear();
    return out;
}

namespace {

// "L" or "L:H" with whole numbers >= 0.
Status parseWhere(const std::string& where, const std::string& text, AttentionOverride& o) {
    const auto colon = where.find(':');
    auto number = [&](const std::string& part, int64_t& out) -> bool {
        if (part.empty() || part.size() > 6) return false;
        for (char c : part) {
            if (c < '0' || c > '9') return false;
        }
        out = std::stoll(part);
        return true;
    };
    if (!number(where.substr(0, colon), o.layer) ||
        (colon != std::string::npos && !number(where.substr(colon + 1), o.head))) {
        return Error{"'" + text +
                     "': expected LAYER or LAYER:HEAD (whole numbers from 0) before '='"};
    }
    return {};
}

}  // namespace

Result<AttentionOverride> parseOverride(const std::string& text) {
    const auto equals = text.find('=');
    if (equals == std::string::npos) {
        return Error{"'" + text +
                     "': expected LAYER[:HEAD]=VARIANT, e.g. 2=relu_len or 1:3=sparsemax"};
    }
    AttentionOverride o;
    if (auto s = parseWhere(text.substr(0, equals), text, o); !s) return Error{s.error()};
    const std::string variant = text.substr(equals + 1);
    if (variant == "zero" || variant == "uniform") {
        o.ablation = variant == "zero" ? Ablation::Zero : Ablation::Uniform;
        return o;
    }
    auto kind = parseAttentionKind(variant);
    if (!kind) return Error{"'" + text + "': " + kind.error()};
    o.spec.kind = *kind;
    return o;
}

Result<AttentionOverride> parseAblation(const std::string& text) {
    const auto equals = text.find('=');
    AttentionOverride o;
    if (auto s = parseWhere(text.substr(0, equals), text, o); !s) return Error{s.error()};
    if (o.head < 0) return Error{"'" + text + "': an ablation names one head, LAYER:HEAD"};
    const std::string mode = equals == std::string::npos ? "zero" : text.substr(equals + 1);
    if (mode != "zero" && mode != "uniform") {
        return Error{"'" + text +
                     "': an ablation is zero (output 0) or uniform (1/n to every visible key)"};
    }
    o.ablation = mode == "zero" ? Ablation::Zero : Ablation::Uniform;
    return o;
}

Status validateOverrides(const RunSpec& run, int64_t layers, int64_t heads) {
    for (const auto& o : run.overrides) {
        if (o.layer < 0 || o.layer >= layers) {
            return Error{"override " + o.label() + ": the model has layers 0–" +
                         std::to_string(layers - 1)};
        }
        if (o.head >= heads) {
            return Error{"override " + o.label() + ": the model has heads 0–" +
                         std::to_string(heads - 1)};
        }
        if (o.ablation == Ablation::None) {
            if (auto s = validateAttentionSpec(o.spec); !s)
                return Error{"override " + o.label() + ": " + s.error()};
        }
    }
    return {};
}

bool AttentionSpec::operator==(const AttentionSpec& other) const {
    if (kind != other.kind) return false;
    if (kind == AttentionKind::Family)
        return familyFunction == other.familyFunction && lengthExponent == other.lengthExponent;
    if (kind == AttentionKind::ReluLen) return lengthExponent == other.lengthExponent;
    if (kind == AttentionKind::Sigmoid) return sigmoidBias == other.sigmoidBias;
    if (kind == AttentionKind::Ssmax) return ssmaxSigma == other.ssmaxSigma;
    return true;
}

}  // namespace relulens::core
