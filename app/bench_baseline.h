// The parts of `relulens bench` that measure something besides ReluLens's own pass: the
// PyTorch-eager notebook baseline (bench/baseline.py) it is compared with, and the tokenizers'
// encoding speed.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"
#include "core/map_source.h"
#include "core/tokenizer.h"

namespace relulens::app {

bool fileExists(const std::string& path);
// The whole file, or "" when it cannot be read.
std::string readFile(const std::string& path);
// bench/baseline.py: installed under share/relulens, or in the source tree above build/bin.
std::string baselineScript();

struct BaselineRun {
    double forwardWithMapsMs = 0, textToPictureMs = 0, peakMb = 0, maxDifference = 0;
};

// bench/baseline.py run with `python` on the same token ids, its map of head (layer, 0) checked
// against `maps`.
core::Result<BaselineRun> runBaseline(const std::string& python, const std::string& script,
                                      const std::string& model,
                                      const std::vector<core::Token>& tokens,
                                      const core::MapSource& maps, int64_t layer, int repeats);

// Encoding `megabytes` MB of the text file (repeated when shorter) with a tokenizer.json or
// tokenizer.model: the best of three runs, each on a freshly loaded tokenizer (nothing cached).
core::Status benchTokenizer(const std::string& path, const std::string& textFile, double megabytes);

}  // namespace relulens::app
