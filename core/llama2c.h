// Importing karpathy/llama2.c models (the TinyStories checkpoints): the legacy v0 `.bin` (seven
// int32 sizes, negative vocabulary for an untied classifier) and the v1 `.bin` ("ak42" header),
// written out as a Hugging Face llama folder that ReluLens opens like any other. llama2.c rotates
// interleaved pairs of each head's dimensions; the folder stores q and k rows permuted into the
// rotate-half order (per query head for q, per kv head for k), which gives identical scores.
#pragma once
#include <string>

#include "core/error.h"
#include "core/safetensors.h"

namespace relulens::core {

struct Llama2cImport {
    std::string model;      // the .bin file
    std::string tokenizer;  // a SentencePiece tokenizer.model matching it
    std::string out;        // the folder to write
    StorageType storage = StorageType::F32;
    bool force = false;  // replace a folder that already holds a model
};

struct Llama2cSummary {
    int version = 0;
    int64_t dim = 0, hiddenDim = 0, layers = 0, heads = 0, kvHeads = 0, vocab = 0, seqLen = 0;
    bool tied = true;
};

Result<Llama2cSummary> importLlama2c(const Llama2cImport& request);

}  // namespace relulens::core
