#include "core/about.h"

namespace relulens::core {

const std::vector<Component>& components() {
    static const std::vector<Component> list = {
        {"Qt 6", "LGPL-3.0-only", "the window (linked)"},
        {"QCustomPlot", "GPL-3.0-or-later", "the plots (linked)"},
        {"LibTorch", "BSD-3-Clause", "tensors and the models (linked)"},
        {"SentencePiece", "Apache-2.0", "the tokenizer (linked through ReluLens's module)"},
        {"nlohmann-json", "MIT", "JSON (compiled in)"},
        {"OpenBLAS", "BSD-3-Clause", "matrix products under LibTorch (linked)"},
        {"Jane Austen's six novels", "public domain",
         "the text the bundled models were trained on"},
        {"the bundled models and tokenizer", kLicence, "trained by ReluLens, part of ReluLens"},
    };
    return list;
}

}  // namespace relulens::core
