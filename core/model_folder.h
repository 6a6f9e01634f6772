// Opening a model folder of any family: ReluLens's own (config.json with "format":
// "relulens-model", model.safetensors, tokenizer.model) or a Hugging Face decoder checkpoint
// (config.json with a model_type, one or several safetensors files, a tokenizer). Every file
// and tensor is checked; each failure names the file and what is wrong, and nothing is loaded.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/language_model.h"
#include "core/tokenizer.h"

namespace relulens::core {

struct LoadOptions {
    std::string device = "auto";  // auto | cpu | cuda | cuda:N
    // Called as the weights are read: the share done (0..1) and what is being read.
    std::function<void(double fraction, const std::string& what)> progress;
    const std::atomic<bool>* cancel = nullptr;  // polled between tensors
};

struct LoadedModel {
    std::string folder;
    std::shared_ptr<LanguageModel> model;
    Tokenizer tokenizer;
};

Result<LoadedModel> loadModelFolder(const std::string& folder, const LoadOptions& options = {});

// What config.json alone says of a folder's model (no other file is read): for model lists.
Result<ModelInfo> readModelConfig(const std::string& folder);

// What loadModelFolder checks, without reading the weights' values when they are large: the
// config, the tokenizer, the files, every tensor's name, dtype and shape, and whether the model
// fits in memory. Quick enough to run before deciding to switch models.
Result<ModelInfo> checkModelFolder(const std::string& folder);

// Bytes of memory the system can give without swapping (MemAvailable), or -1 when unknown.
int64_t availableMemoryBytes();
// Refuses, with the numbers, a model whose float32 weights would not fit in available memory.
Status checkMemoryFor(const std::string& folder, int64_t parameters);

}  // namespace relulens::core
