#include "core/model_folder.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/device.h"
#include "core/hf_checkpoint.h"
#include "core/hf_config.h"
#include "core/transformer.h"

namespace relulens::core {

namespace fs = std::filesystem;

namespace {

enum class Family { Relulens, HuggingFace };

Result<nlohmann::json> readConfigJson(const std::string& folder) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) return Error{folder + ": no such model folder"};
    const std::string path = (fs::path(folder) / "config.json").string();
    if (!fs::exists(path, ec)) return Error{path + ": missing"};
    std::ifstream in(path);
    if (!in) return Error{path + ": cannot open the file"};
    nlohmann::json j;
    try {
        in >> j;
    } catch (const nlohmann::json::exception& e) {
        return Error{path + ": not valid JSON (" + e.what() + ")"};
    }
    return j;
}

Result<Family> familyOf(const std::string& folder) {
    auto j = readConfigJson(folder);
    if (!j) return Error{j.error()};
    return isHfConfig(*j) ? Family::HuggingFace : Family::Relulens;
}

std::string folderName(const std::string& folder) {
    fs::path p(folder);
    if (p.filename().empty()) p = p.parent_path();
    return p.filename().string();
}

std::string gigabytes(double bytes) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.1f GB", bytes / 1e9);
    return buffer;
}

}  // namespace

int64_t availableMemoryBytes() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    int64_t value = 0;
    std::string unit;
    while (meminfo >> key >> value) {
        std::getline(meminfo, unit);
        if (key == "MemAvailable:") return value * 1024;
    }
    return -1;
}

Status checkMemoryFor(const std::string& folder, int64_t parameters) {
    const double needed = double(parameters) * 4.0;
    const int64_t available = availableMemoryBytes();
    if (available >= 0 && needed > double(available)) {
        char count[32];
        std::snprintf(count, sizeof count, "%.2f", double(parameters) / 1e9);
        return Error{folder + ": the model needs " + gigabytes(needed) + " of memory (" + count +
                     " billion parameters as float32) and " + gigabytes(double(available)) +
                     " are available; close other programs or open a smaller model"};
    }
    return {};
}

Result<LoadedModel> loadModelFolder(const std::string& folder, const LoadOptions& options) {
    auto device = selectDevice(options.device);
    if (!device) return Error{device.error()};
    auto family = familyOf(folder);
    if (!family) return Error{family.error()};
    auto loaded =
        *family == Family::HuggingFace ? loadHfFolder(folder, options) : loadRelulensFolder(folder);
    if (!loaded) return loaded;
    if (device->type() != torch::kCPU) loaded->model->to(*device);
    return loaded;
}

Result<ModelInfo> readModelConfig(const std::string& folder) {
    auto j = readConfigJson(folder);
    if (!j) return Error{j.error()};
    const std::string path = (fs::path(folder) / "config.json").string();
    if (isHfConfig(*j)) {
        auto config = hfConfigFromJson(*j);
        if (!config) return Error{path + ": " + config.error()};
        return hfModelInfo(*config, folderName(folder));
    }
    auto config = configFromJson(*j);
    if (!config) return Error{path + ": " + config.error()};
    return modelInfoOf(*config);
}

Result<ModelInfo> checkModelFolder(const std::string& folder) {
    auto family = familyOf(folder);
    if (!family) return Error{family.error()};
    if (*family == Family::HuggingFace) return checkHfFolder(folder);
    // ReluLens models are small: checking them is loading them.
    auto loaded = loadRelulensFolder(folder);
    if (!loaded) return Error{loaded.error()};
    return loaded->model->info();
}

}  // namespace relulens::core
