// The JSON form of a capture, as `relulens inspect --json` writes it (documented in README.md).
#pragma once
#include <nlohmann/json.hpp>

#include "core/capture.h"

namespace relulens::core {

nlohmann::json runSpecToJson(const RunSpec& run);
nlohmann::json captureToJson(const CaptureResult& result);

}  // namespace relulens::core
