// What `relulens bench` was asked to measure (app/bench_command.cpp), read and checked from its
// arguments.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "app/arguments.h"
#include "core/error.h"

namespace relulens::app {

struct BenchOptions {
    std::string modelFolder, textFile;
    std::vector<size_t> sizes = {128, 512, 2048, 8192};
    int64_t repeats = 5, baselineRepeats = 3;
    std::string device = "auto";
    bool baseline = false, gui = true;
    std::string python = "/usr/bin/python3", script;
    std::string tokenizer;  // --tokenizer: measure this tokenizer's encoding speed
    double megabytes = 1.0;
    bool modelAsked = false;
    std::string json;  // where the figures are written, or empty
};

// The options of `relulens bench`, or what is wrong with them.
core::Result<BenchOptions> benchOptions(const Arguments& args);

}  // namespace relulens::app
