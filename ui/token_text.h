// Display text for tokens: pieces as SentencePiece writes them, made printable
// ("▁" kept as the word-start mark, newline shown as "↵").
#pragma once
#include <QString>

#include "core/capture.h"

namespace relulens::ui {

QString tokenLabel(const core::CaptureResult& result, int index);

// UTF-16 position in `text` -> index of the token covering it (-1 if none).
int tokenAtTextPosition(const core::CaptureResult& result, const QString& text, int position);

}  // namespace relulens::ui
