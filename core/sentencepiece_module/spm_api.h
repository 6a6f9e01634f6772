// Plain C interface of the SentencePiece module (librelulens_spm.so).
// SentencePiece is used only behind this interface, loaded with dlopen(RTLD_LOCAL|RTLD_DEEPBIND):
// its private protobuf copy crashes a process that also links LibTorch's protobuf.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_SPM_API_VERSION 1

typedef struct rl_spm rl_spm;

typedef struct rl_spm_token {
    int32_t id;
    uint32_t begin;  // byte offset of the piece's surface in the input text
    uint32_t end;    // one past its last byte
} rl_spm_token;

// Every function that can fail returns 0 on success and writes a message into err otherwise.
int rl_spm_api_version(void);
rl_spm* rl_spm_load(const char* path, char* err, size_t errlen);
void rl_spm_free(rl_spm* model);
int rl_spm_vocab_size(const rl_spm* model);
// Piece string of an id; valid while the model lives. NULL when out of range.
const char* rl_spm_id_to_piece(const rl_spm* model, int32_t id);
// 1 when the id is a control symbol (<s>, </s>), an unknown symbol, or a byte piece.
int rl_spm_is_control(const rl_spm* model, int32_t id);
int rl_spm_is_byte(const rl_spm* model, int32_t id);
int rl_spm_encode(const rl_spm* model, const char* text, size_t len, rl_spm_token** tokens,
                  size_t* count, char* err, size_t errlen);
void rl_spm_free_tokens(rl_spm_token* tokens);
int rl_spm_decode(const rl_spm* model, const int32_t* ids, size_t count, char** text, size_t* len,
                  char* err, size_t errlen);
void rl_spm_free_string(char* text);
// keys/values: SentencePiece trainer options ("input", "model_prefix", "vocab_size", ...).
int rl_spm_train(const char* const* keys, const char* const* values, size_t count, char* err,
                 size_t errlen);

#ifdef __cplusplus
}
#endif
