#include "core/capture_json.h"

#include <cmath>

#include "core/model_config.h"

namespace relulens::core {

using nlohmann::json;

namespace {

json buckets(const std::vector<VarianceBucket>& list, const char* lowKey, const char* highKey) {
    json out = json::array();
    for (const auto& b : list)
        out.push_back({{lowKey, b.nLow}, {highKey, b.nHigh}, {"variance", b.variance}});
    return out;
}

// Causal map rows as ragged arrays: row i holds keys 0..i, the entries it can see.
json raggedRows(const torch::Tensor& map) {
    auto m = map.to(torch::kFloat32).contiguous();
    json rows = json::array();
    for (int64_t i = 0; i < m.size(0); ++i) {
        const float* row = m[i].data_ptr<float>();
        rows.push_back(std::vector<float>(row, row + i + 1));
    }
    return rows;
}

json sparsityRule(const SparsityRule& rule, const char* tauOf) {
    json r = {{"exact_zero", rule.exactZero}};
    if (!rule.exactZero) {
        r["tau_scale"] = rule.tauScale;
        r["tau"] = std::string("tau_scale / ") + tauOf;
    }
    return r;
}

// NaN (a norm over no tokens) as null.
json number(double v) {
    return std::isfinite(v) ? json(v) : json(nullptr);
}

json sinkToJson(const SinkDiagnostics& s) {
    return {{"first_token_share", s.firstTokenShare},
            {"zero_mass_rows", s.zeroMassRows},
            {"sink_score", s.sinkScore},
            {"sink_head", s.sinkHead},
            {"first_key_norm", number(s.firstKeyNorm)},
            {"other_key_norm", number(s.otherKeyNorm)},
            {"first_value_norm", number(s.firstValueNorm)},
            {"other_value_norm", number(s.otherValueNorm)}};
}

json residualToJson(const ResidualDiagnostics& r) {
    json largest = json::array();
    for (const auto& p : r.largest) {
        largest.push_back({{"value", p.value}, {"token", p.token}, {"dimension", p.dimension}});
    }
    return {{"largest", largest},
            {"median_abs", r.medianAbs},
            {"largest_over_median", r.largestOverMedian()},
            {"kurtosis", r.kurtosis}};
}

}  // namespace

json runSpecToJson(const RunSpec& run) {
    json attention = attentionSpecToJson(run.attention);
    attention["label"] = run.attention.label();
    json overrides = json::array();
    for (const auto& o : run.overrides) {
        json entry = {
            {"layer", o.layer}, {"head", o.head < 0 ? json() : json(o.head)}, {"label", o.label()}};
        if (o.ablation == Ablation::None) {
            entry["attention"] = attentionSpecToJson(o.spec);
        } else {
            entry["ablation"] = o.ablation == Ablation::Zero ? "zero" : "uniform";
        }
        overrides.push_back(entry);
    }
    return {{"attention", attention}, {"ffn", ffnKindName(run.ffn)}, {"overrides", overrides}};
}

json captureToJson(const CaptureResult& r) {
    json out;
    out["model"] = modelInfoToJson(r.model);
    out["run"] = runSpecToJson(r.run);
    out["run"]["device"] = r.device;
    out["run"]["trained_with_this_variant"] = r.trainedWithRun;
    out["run"]["tau_scale"] = r.tauScale;
    out["run"]["sink_threshold"] = r.sinkThreshold;
    out["run"]["milliseconds"] = r.milliseconds;

    json tokens = json::array();
    for (const auto& t : r.tokens) {
        tokens.push_back({{"id", t.id}, {"piece", t.piece}, {"start", t.start}, {"end", t.end}});
    }
    out["tokens"] = tokens;

    const SparsityRule attentionRule =
        attentionSparsityRule(r.run, r.model.nLayers, r.model.nHeads, r.tauScale);
    json layers = json::array();
    for (size_t l = 0; l < r.layers.size(); ++l) {
        const auto& layer = r.layers[l];
        json heads = json::array();
        for (size_t h = 0; h < layer.attentionDiagnostics.heads.size(); ++h) {
            const auto& d = layer.attentionDiagnostics.heads[h];
            heads.push_back({{"head", h},
                             {"sparsity", d.sparsity},
                             {"entropy", d.entropy},
                             {"row_mass", d.rowMass},
                             {"row_mass_std", d.rowMassStd},
                             {"top_ratio", d.topShare},
                             {"top_ratio_1pct", d.topOnePercentShare},
                             {"output_variance", d.outputVariance},
                             {"empty_rows", d.emptyRows},
                             {"distance_profile", d.distanceProfile},
                             {"sink", sinkToJson(d.sink)}});
        }
        json ffn = {{"sparsity", layer.ffn.sparsity},
                    {"sparsity_rule", sparsityRule(layer.ffn.rule, "d_ff")},
                    {"output_variance", layer.ffn.outputVariance},
                    {"output_variance_by_slots",
                     buckets(layer.ffn.outputVarianceBySlots, "slots_from", "slots_to")}};
        layers.push_back({{"layer", l},
                          {"sparsity_rule", sparsityRule(attentionRule, "n_i")},
                          {"heads", heads},
                          {"output_variance_by_n",
                           buckets(layer.attentionDiagnostics.outputVarianceByN, "n_from", "n_to")},
                          {"ffn", ffn},
                          {"residual", residualToJson(layer.residual)}});
    }
    out["layers"] = layers;

    json predictions = json::array();
    for (size_t i = 0; i < r.predictions.size(); ++i) {
        json top = json::array();
        for (const auto& p : r.predictions[i]) {
            top.push_back({{"id", p.id}, {"piece", p.piece}, {"probability", p.probability}});
        }
        predictions.push_back({{"position", i}, {"top", top}});
    }
    out["predictions"] = predictions;

    json maps = json::array();
    for (const auto& m : r.maps->requested()) {
        json entry = {
            {"layer", m.ref.layer}, {"head", m.ref.head}, {"weights", raggedRows(m.weights)}};
        if (m.scores.defined()) entry["scores"] = raggedRows(m.scores);
        maps.push_back(entry);
    }
    out["maps"] = maps;

    if (r.effect) {
        out["effect"] = {{"loss", r.effect->loss},
                         {"unchanged_loss", r.effect->unchangedLoss},
                         {"delta_log_prob", r.effect->deltaLogProb},
                         {"kl", r.effect->kl}};
    }
    if (r.lens) {
        json perLayer = json::array();
        const auto& p = r.lens->nextTokenProbability;
        for (int64_t l = 0; l < p.size(0); ++l) {
            const auto row = p[l].contiguous();
            perLayer.push_back(
                {{"layer", l},
                 {"next_token_probability",
                  std::vector<float>(row.data_ptr<float>(), row.data_ptr<float>() + row.numel())}});
        }
        json top = json::array();
        for (const auto& at : r.lens->top) {
            json layersTop = json::array();
            for (size_t l = 0; l < at.layers.size(); ++l) {
                json entries = json::array();
                for (const auto& pr : at.layers[l]) {
                    entries.push_back(
                        {{"id", pr.id}, {"piece", pr.piece}, {"probability", pr.probability}});
                }
                layersTop.push_back({{"layer", l}, {"top", entries}});
            }
            top.push_back({{"position", at.position}, {"layers", layersTop}});
        }
        out["lens"] = {{"layers", perLayer}, {"top", top}};
    }
    return out;
}

}  // namespace relulens::core
