// Fuzz target: the files of a model folder. An input is config.json's bytes, a NUL byte, then
// model.safetensors' bytes; without a NUL the same bytes serve as both. Loading must give a
// model or an error message, never crash, hang or leak; what loads must survive a round trip
// and a forward pass.
#include <cmath>
#include <cstdint>
#include <string>

#include <torch/csrc/autograd/grad_mode.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/model_config.h"
#include "core/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

using namespace relulens::core;
using relulens::fuzz::fail;

namespace {

// Same config after writing it to JSON and reading it back.
void checkConfigRoundTrip(const ModelConfig& c) {
    auto again = configFromJson(configToJson(c));
    if (!again) fail("a loaded config does not load again after saving: " + again.error());
    const ModelConfig& d = *again;
    if (d.vocabSize != c.vocabSize || d.dModel != c.dModel || d.nLayers != c.nLayers ||
        d.nHeads != c.nHeads || d.dFf != c.dFf || d.contextLength != c.contextLength ||
        d.ropeBase != c.ropeBase || d.normEps != c.normEps || d.name != c.name ||
        d.description != c.description || d.trained.ffn != c.trained.ffn ||
        d.trained.attention != c.trained.attention) {
        fail("config changes in a save/load round trip");
    }
}

// Same tensors (bit for bit) and metadata after writing the file as f32 and reading it back.
void checkWeightsRoundTrip(const SafetensorsFile& file, const std::string& path) {
    for (const auto& [name, t] : file.tensors) {
        if (t.scalar_type() != torch::kFloat32 || !t.device().is_cpu()) {
            fail("tensor '" + name + "' is not a CPU float32 tensor after loading");
        }
    }
    if (auto s = writeSafetensors(path, file.tensors, StorageType::F32, file.metadata); !s) {
        fail("cannot write loaded tensors: " + s.error());
    }
    auto again = readSafetensors(path);
    if (!again) fail("written tensors do not read back: " + again.error());
    if (again->metadata != file.metadata) fail("metadata changes in a round trip");
    if (again->tensors.size() != file.tensors.size()) fail("tensor count changes in a round trip");
    for (const auto& [name, t] : file.tensors) {
        auto it = again->tensors.find(name);
        if (it == again->tensors.end()) fail("tensor '" + name + "' is lost in a round trip");
        if (it->second.sizes() != t.sizes() ||
            !torch::equal(it->second.view(torch::kInt32), t.contiguous().view(torch::kInt32))) {
            fail("tensor '" + name + "' changes in a round trip");
        }
    }
}

void runModel(const ModelConfig& config, TensorMap tensors) {
    torch::NoGradGuard noGrad;
    const auto model = Transformer::fromTensors(config, std::move(tensors));
    const int64_t V = config.vocabSize;
    auto ids = torch::tensor(std::vector<int64_t>{0, V - 1, V / 2}, torch::kLong).view({1, 3});
    for (auto kind : {AttentionKind::Softmax, AttentionKind::ReluFormer}) {
        RunSpec run;
        run.attention.kind = kind;
        auto logits = model.forward(ids, run);
        if (logits.sizes() != torch::IntArrayRef({1, 3, V})) fail("logits have the wrong shape");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const relulens::fuzz::ScratchFolder folder;
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    const size_t split = bytes.find('\0');
    const std::string configBytes = split == std::string::npos ? bytes : bytes.substr(0, split);
    const std::string weightBytes = split == std::string::npos ? bytes : bytes.substr(split + 1);

    auto config = loadConfigFile(folder.write("config.json", configBytes));
    if (config) checkConfigRoundTrip(*config);
    const std::string weightsPath = folder.write("model.safetensors", weightBytes);
    auto file = readSafetensors(weightsPath);
    if (!file) return 0;
    if (config) {
        if (auto s = validateTensors(*config, file->tensors, weightsPath); s) {
            runModel(*config, file->tensors);
        }
    }
    checkWeightsRoundTrip(*file, folder.file("again.safetensors"));
    return 0;
}
