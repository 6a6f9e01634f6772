#include "ui/token_text.h"

namespace relulens::ui {

QString tokenLabel(const core::CaptureResult& result, int index) {
    if (index < 0 || index >= int(result.tokens.size())) return QString();
    const auto& token = result.tokens[size_t(index)];
    return QString::fromStdString(token.readable.empty() ? token.piece : token.readable);
}

int tokenAtTextPosition(const core::CaptureResult& result, const QString& text, int position) {
    const size_t byte = size_t(text.left(position).toUtf8().size());
    for (size_t i = 0; i < result.tokens.size(); ++i) {
        if (byte >= result.tokens[i].start && byte < result.tokens[i].end) return int(i);
    }
    return result.tokens.empty() ? -1 : int(result.tokens.size()) - 1;
}

}  // namespace relulens::ui
