// The only translation unit that touches SentencePiece. Exceptions never cross the C boundary.
#include "spm_api.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

struct rl_spm {
    sentencepiece::SentencePieceProcessor processor;
};

namespace {

void setError(char* err, size_t errlen, const std::string& message) {
    if (!err || errlen == 0) return;
    std::strncpy(err, message.c_str(), errlen - 1);
    err[errlen - 1] = '\0';
}

}  // namespace

extern "C" {

int rl_spm_api_version(void) {
    return RL_SPM_API_VERSION;
}

rl_spm* rl_spm_load(const char* path, char* err, size_t errlen) {
    try {
        auto* model = new rl_spm;
        const auto status = model->processor.Load(path);
        if (!status.ok()) {
            setError(err, errlen, status.ToString());
            delete model;
            return nullptr;
        }
        return model;
    } catch (const std::exception& e) {
        setError(err, errlen, e.what());
        return nullptr;
    }
}

void rl_spm_free(rl_spm* model) {
    delete model;
}

int rl_spm_vocab_size(const rl_spm* model) {
    return model->processor.GetPieceSize();
}

const char* rl_spm_id_to_piece(const rl_spm* model, int32_t id) {
    if (id < 0 || id >= model->processor.GetPieceSize()) return nullptr;
    return model->processor.IdToPiece(id).c_str();
}

int rl_spm_is_control(const rl_spm* model, int32_t id) {
    if (id < 0 || id >= model->processor.GetPieceSize()) return 0;
    return model->processor.IsControl(id) || model->processor.IsUnknown(id);
}

int rl_spm_is_byte(const rl_spm* model, int32_t id) {
    if (id < 0 || id >= model->processor.GetPieceSize()) return 0;
    return model->processor.IsByte(id);
}

int rl_spm_encode(const rl_spm* model, const char* text, size_t len, rl_spm_token** tokens,
                  size_t* count, char* err, size_t errlen) {
    try {
        sentencepiece::ImmutableSentencePieceText spt;
        const auto status = model->processor.Encode(std::string(text, len), spt.mutable_proto());
        if (!status.ok()) {
            setError(err, errlen, status.ToString());
            return 1;
        }
        const size_t n = spt.pieces_size();
        auto* out = static_cast<rl_spm_token*>(std::malloc(sizeof(rl_spm_token) * (n ? n : 1)));
        if (!out) {
            setError(err, errlen, "out of memory");
            return 1;
        }
        for (size_t i = 0; i < n; ++i) {
            const auto piece = spt.pieces(static_cast<int>(i));
            out[i] = rl_spm_token{static_cast<int32_t>(piece.id()), piece.begin(), piece.end()};
        }
        *tokens = out;
        *count = n;
        return 0;
    } catch (const std::exception& e) {
        setError(err, errlen, e.what());
        return 1;
    }
}

void rl_spm_free_tokens(rl_spm_token* tokens) {
    std::free(tokens);
}

int rl_spm_decode(const rl_spm* model, const int32_t* ids, size_t count, char** text, size_t* len,
                  char* err, size_t errlen) {
    try {
        std::vector<int> idVector(ids, ids + count);
        std::string decoded;
        const auto status = model->processor.Decode(idVector, &decoded);
        if (!status.ok()) {
            setError(err, errlen, status.ToString());
            return 1;
        }
        auto* out = static_cast<char*>(std::malloc(decoded.size() + 1));
        if (!out) {
            setError(err, errlen, "out of memory");
            return 1;
        }
        std::memcpy(out, decoded.data(), decoded.size());
        out[decoded.size()] = '\0';
        *text = out;
        *len = decoded.size();
        return 0;
    } catch (const std::exception& e) {
        setError(err, errlen, e.what());
        return 1;
    }
}

void rl_spm_free_string(char* text) {
    std::free(text);
}

int rl_spm_train(const char* const* keys, const char* const* values, size_t count, char* err,
                 size_t errlen) {
    try {
        std::unordered_map<std::string, std::string> kwargs;
        for (size_t i = 0; i < count; ++i) kwargs[keys[i]] = values[i];
        const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs);
        if (!status.ok()) {
            setError(err, errlen, status.ToString());
            return 1;
        }
        return 0;
    } catch (const std::exception& e) {
        setError(err, errlen, e.what());
        return 1;
    }
}

}  // extern "C"
