// Hugging Face–layout model folders: config.json; model.safetensors, or shards named by
// model.safetensors.index.json; tokenizer.model (SentencePiece) with tokenizer_config.json when
// present. Weights are memory-mapped and converted to float32 tensor by tensor, never read into
// one buffer; a model that would not fit in memory is refused before anything is allocated.
#pragma once
#include <string>

#include "core/error.h"
#include "core/model_folder.h"

namespace relulens::core {

Result<LoadedModel> loadHfFolder(const std::string& folder, const LoadOptions& options);
Result<ModelInfo> checkHfFolder(const std::string& folder);

}  // namespace relulens::core
