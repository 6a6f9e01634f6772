#include "core/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"

namespace relulens::core {

namespace fs = std::filesystem;

namespace {

std::string shapeText(c10::IntArrayRef shape) {
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "×" : "") + std::to_string(shape[i]);
    return s.empty() ? "scalar" : s;
}

}  // namespace

Status validateTensors(const ModelConfig& config, const TensorMap& tensors,
                       const std::string& file) {
    std::set<std::string> expected;
    for (const auto& t : config.tensorShapes()) {
        expected.insert(t.name);
        auto it = tensors.find(t.name);
        if (it == tensors.end()) {
            return Error{file + ": tensor '" + t.name + "' is missing (config.json expects it)"};
        }
        if (it->second.sizes().vec() != t.shape) {
            return Error{file + ": tensor '" + t.name + "' has shape " +
                         shapeText(it->second.sizes()) + ", config says " + shapeText(t.shape)};
        }
        if (!torch::isfinite(it->second).all().item<bool>()) {
            const auto bad = (~torch::isfinite(it->second)).sum().item<int64_t>();
            return Error{file + ": tensor '" + t.name + "' holds " + std::to_string(bad) +
                         " NaN or infinite value(s)"};
        }
    }
    for (const auto& [name, t] : tensors) {
        if (!expected.count(name)) {
            return Error{file + ": unexpected tensor '" + name + "' (not part of this config)"};
        }
    }
    return {};
}

Result<Transformer> loadWeights(const std::string& folder) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) return Error{folder + ": no such model folder"};
    const std::string configPath = (fs::path(folder) / "config.json").string();
    const std::string weightsPath = (fs::path(folder) / "model.safetensors").string();
    if (!fs::exists(configPath, ec)) return Error{configPath + ": missing"};
    if (!fs::exists(weightsPath, ec)) return Error{weightsPath + ": missing"};
    auto config = loadConfigFile(configPath);
    if (!config) return Error{config.error()};
    auto file = readSafetensors(weightsPath);
    if (!file) return Error{file.error()};
    if (auto s = validateTensors(*config, file->tensors, weightsPath); !s) return Error{s.error()};
    return Transformer::fromTensors(*config, std::move(file->tensors));
}

Result<LoadedModel> loadRelulensFolder(const std::string& folder) {
    auto model = loadWeights(folder);
    if (!model) return Error{model.error()};
    const std::string tokenizerPath = (fs::path(folder) / "tokenizer.model").string();
    std::error_code ec;
    if (!fs::exists(tokenizerPath, ec)) return Error{tokenizerPath + ": missing"};
    auto tokenizer = Tokenizer::load(tokenizerPath);
    if (!tokenizer) return Error{tokenizer.error()};
    if (tokenizer->vocabSize() != model->config().vocabSize) {
        return Error{tokenizerPath + ": the tokenizer has " +
                     std::to_string(tokenizer->vocabSize()) + " pieces, config.json says " +
                     std::to_string(model->config().vocabSize)};
    }
    return LoadedModel{folder, std::make_shared<Transformer>(std::move(*model)),
                       std::move(*tokenizer)};
}

Status saveModelFolder(const std::string& folder, const Transformer& model,
                       const std::string& tokenizerPath, StorageType storage) {
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) return Error{folder + ": cannot create the folder (" + ec.message() + ")"};
    const fs::path dir(folder);
    if (auto s = writeTextAtomically((dir / "config.json").string(),
                                     configToJson(model.config()).dump(2) + "\n");
        !s) {
        return s;
    }
    TensorMap cpu;
    for (const auto& [name, t] : model.tensors()) cpu[name] = t.detach().to(torch::kCPU);
    if (auto s = writeSafetensors((dir / "model.safetensors").string(), cpu, storage,
                                  {{"format", "relulens"}});
        !s) {
        return s;
    }
    const fs::path target = dir / "tokenizer.model";
    if (!tokenizerPath.empty() &&
        !(fs::exists(target, ec) && fs::equivalent(tokenizerPath, target, ec))) {
        fs::copy_file(tokenizerPath, target, fs::copy_options::overwrite_existing, ec);
        if (ec)
            return Error{target.string() + ": cannot copy the tokenizer (" + ec.message() + ")"};
    }
    return {};
}

}  // namespace relulens::core
