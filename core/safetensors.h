// Reading and writing the safetensors format: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then raw little-endian data.
// Reading validates every bound before touching data; nothing in the file is executed.
#pragma once
#include <map>
#include <string>

#include "core/error.h"
#include "core/torch_include.h"

namespace relulens::core {

enum class StorageType { F32, F16, BF16 };

using TensorMap = std::map<std::string, torch::Tensor>;

struct SafetensorsFile {
    TensorMap tensors;  // converted to float32 on the CPU
    std::map<std::string, std::string> metadata;
};

Result<SafetensorsFile> readSafetensors(const std::string& path);
// Writes atomically (temporary file, then rename). Tensors are converted to `type`.
Status writeSafetensors(const std::string& path, const TensorMap& tensors, StorageType type,
                        const std::map<std::string, std::string>& metadata = {});

Result<StorageType> parseStorageType(const std::string& name);

}  // namespace relulens::core
