// Shared helpers for ReluLens tests: data paths and tensor comparisons.
#pragma once
#include <QString>
#include <QtTest>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/torch_include.h"
#include "core/variants.h"

namespace relulens::test {

// The per-layer and per-head overrides of a NumPy reference run (tests/reference/*.py):
// [{"layer": L, "head": H (absent: the whole layer), "attention": V | "ablate": zero|uniform}].
inline std::vector<core::AttentionOverride> overridesFromJson(const nlohmann::json& list) {
    std::vector<core::AttentionOverride> out;
    for (const auto& o : list) {
        core::AttentionOverride entry;
        entry.layer = o["layer"];
        entry.head = o.value("head", int64_t(-1));
        if (o.contains("ablate")) {
            entry.ablation = o["ablate"] == "zero" ? core::Ablation::Zero : core::Ablation::Uniform;
        } else {
            entry.spec.kind = *core::parseAttentionKind(o["attention"].get<std::string>());
        }
        out.push_back(entry);
    }
    return out;
}

inline std::string dataPath(const std::string& name) {
    return std::string(RELULENS_TEST_DATA) + "/" + name;
}

inline std::string binPath(const std::string& name) {
    return std::string(RELULENS_BIN_DIR) + "/" + name;
}

// The process's resident memory now (VmRSS), in MB.
inline double residentMb() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
    }
    return 0;
}

// Compares a (rows, cols) tensor with expected values written out row by row.
inline bool matches(const torch::Tensor& actual, const std::vector<std::vector<double>>& expected,
                    double tolerance, QString* why) {
    auto a = actual.to(torch::kFloat64).contiguous();
    if (a.dim() != 2 || a.size(0) != int64_t(expected.size())) {
        *why = "shape mismatch";
        return false;
    }
    for (size_t i = 0; i < expected.size(); ++i) {
        if (a.size(1) != int64_t(expected[i].size())) {
            *why = "row length mismatch";
            return false;
        }
        for (size_t j = 0; j < expected[i].size(); ++j) {
            const double v = a[int64_t(i)][int64_t(j)].item<double>();
            if (std::abs(v - expected[i][j]) > tolerance) {
                *why = QString("entry (%1,%2) is %3, expected %4")
                           .arg(i)
                           .arg(j)
                           .arg(v, 0, 'g', 9)
                           .arg(expected[i][j], 0, 'g', 9);
                return false;
            }
        }
    }
    return true;
}

}  // namespace relulens::test

#define RL_COMPARE_ROWS(actual, expected, tol)                                                     \
    do {                                                                                           \
        QString why_;                                                                              \
        if (!relulens::test::matches((actual), (expected), (tol), &why_)) QFAIL(qPrintable(why_)); \
    } while (0)
