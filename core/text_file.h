// Reading a text a person opens (File ▸ Open text, a dropped file, `--file`): at most 5 MB, and
// UTF-8, each refusal a message that names the file and what to do.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"

namespace relulens::core {

constexpr int64_t kMaxTextFileBytes = 5 * 1024 * 1024;

Result<std::string> readTextFile(const std::string& path, int64_t maxBytes = kMaxTextFileBytes);

}  // namespace relulens::core
