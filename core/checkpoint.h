// ReluLens's own model folders: config.json, model.safetensors and tokenizer.model. Loading
// validates every file and every tensor against the config; each failure names the file and
// the tensor. (model_folder.h opens folders of any family.)
#pragma once
#include <string>

#include "core/error.h"
#include "core/model_folder.h"
#include "core/safetensors.h"
#include "core/tokenizer.h"
#include "core/transformer.h"

namespace relulens::core {

// Checks tensors against the config: missing, extra, wrong shape, NaN or Inf.
Status validateTensors(const ModelConfig& config, const TensorMap& tensors,
                       const std::string& file);

Result<Transformer> loadWeights(const std::string& folder);
Result<LoadedModel> loadRelulensFolder(const std::string& folder);

// Writes config.json and model.safetensors into folder (created if missing) and copies the
// tokenizer model beside them unless tokenizerPath is already that file.
Status saveModelFolder(const std::string& folder, const Transformer& model,
                       const std::string& tokenizerPath, StorageType storage);

}  // namespace relulens::core
