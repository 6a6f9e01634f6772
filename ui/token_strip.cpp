#include "ui/token_strip.h"

#include <QMouseEvent>
#include <QPaintEvent>
#include <QPainter>

#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/token_text.h"

namespace relulens::ui {

TokenStrip::TokenStrip(AppState* state, QWidget* parent) : QWidget(parent), state_(state) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    connect(state_, &AppState::resultChanged, this, [this] {
        measureChips();
        layoutChips();
        updateGeometry();
        update();
    });
    for (auto signal :
         {&AppState::layerHeadChanged, &AppState::queryChanged, &AppState::slotChanged}) {
        connect(state_, signal, this, qOverload<>(&QWidget::update));
    }
}

void TokenStrip::setColouring(Colouring colouring) {
    colouring_ = colouring;
    update();
}

QSize TokenStrip::sizeHint() const {
    return {400, std::min(contentHeight_, 220)};
}

int TokenStrip::heightForWidth(int) const {
    return contentHeight_;
}

QRect TokenStrip::chipRect(int token) const {
    return token >= 0 && token < chips_.size() ? chips_[token] : QRect();
}

void TokenStrip::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    layoutChips();
}

void TokenStrip::changeEvent(QEvent* event) {
    QWidget::changeEvent(event);
    if (event->type() == QEvent::FontChange) {
        widthOfLabel_.clear();
        measureChips();
        layoutChips();
        updateGeometry();
    }
}

void TokenStrip::measureChips() {
    // Labels and their widths once per result: a resize only reflows them (measuring 10,000
    // labels again on every resize stalled the window).
    labels_.clear();
    widths_.clear();
    auto result = state_->result();
    if (!result) return;
    const QFontMetrics metrics(font());
    labels_.reserve(int(result->tokens.size()));
    widths_.reserve(int(result->tokens.size()));
    for (int i = 0; i < int(result->tokens.size()); ++i) {
        labels_.push_back(tokenLabel(*result, i));
        auto known = widthOfLabel_.constFind(labels_.back());
        if (known == widthOfLabel_.cend())
            known = widthOfLabel_.insert(labels_.back(),
                                         metrics.horizontalAdvance(labels_.back()) + 10);
        widths_.push_back(*known);
    }
}

void TokenStrip::layoutChips() {
    chips_.clear();
    const QFontMetrics metrics(font());
    const int h = metrics.height() + 6;
    int x = 4, y = 4;
    for (int i = 0; i < widths_.size(); ++i) {
        const int w = widths_[i];
        if (x + w > width() - 4 && x > 4) {
            x = 4;
            y += h + 4;
        }
        chips_.push_back(QRect(x, y, w, h));
        x += w + 3;
    }
    contentHeight_ = y + h + 6;
    setMinimumHeight(std::min(contentHeight_, 220));
}

void TokenStrip::paintEvent(QPaintEvent* event) {
    QPainter painter(this);
    painter.setRenderHint(QPainter::Antialiasing);
    auto result = state_->result();
    if (!result || chips_.isEmpty()) {
        painter.drawText(rect(), Qt::AlignCenter, "tokens appear here");
        return;
    }
    torch::Tensor values;
    double top = 1.0;
    if (colouring_ == Colouring::Sparsity)
        values = rowSparsity(*result, state_->layer(), state_->head());
    if (colouring_ == Colouring::Entropy) {
        values = rowEntropy(*result, state_->layer(), state_->head());
        if (values.defined()) top = std::max(1e-6, values.max().item<double>());
    }
    if (colouring_ == Colouring::Slot && state_->slot() >= 0 &&
        state_->layer() < int(result->layers.size())) {
        const auto& activations = result->layers[size_t(state_->layer())].slotActivations;
        if (activations.defined() && state_->slot() < activations.size(1)) {
            values = activations.select(1, state_->slot()).clamp_min(0);
            top = std::max(1e-6, values.max().item<double>());
        }
    }
    if (colouring_ == Colouring::Effect && result->effect && !result->effect->kl.empty()) {
        // Token i by what the overrides change in predicting the token after it.
        values = torch::zeros({int64_t(result->tokens.size())}, torch::kFloat32);
        for (size_t i = 0; i < result->effect->kl.size(); ++i)
            values[int64_t(i)] = float(result->effect->kl[i]);
        top = std::max(1e-6, values.max().item<double>());
    }
    if (values.defined()) values = values.contiguous();
    // Only the chips in the part being painted: a long text's strip scrolls, and drawing its
    // thousands of hidden chips stalled the window.
    const QRect dirty = event->rect();
    for (int i = 0; i < chips_.size(); ++i) {
        if (!chips_[i].intersects(dirty)) continue;
        QColor fill(235, 235, 240);
        if (values.defined() && i < values.size(0)) {
            const double v = std::clamp(double(values.data_ptr<float>()[i]) / top, 0.0, 1.0);
            fill = QColor::fromHsvF(0.6, 0.15 + 0.7 * v, 1.0 - 0.25 * v);
        }
        painter.setBrush(fill);
        const bool selected = i == state_->queryToken();
        painter.setPen(selected ? QPen(QColor(230, 40, 40), 2) : QPen(QColor(160, 160, 170)));
        painter.drawRoundedRect(chips_[i], 4, 4);
        painter.setPen(Qt::black);
        painter.drawText(chips_[i], Qt::AlignCenter, labels_[i]);
    }
}

void TokenStrip::mousePressEvent(QMouseEvent* event) {
    for (int i = 0; i < chips_.size(); ++i) {
        if (chips_[i].contains(event->pos())) {
            state_->setQueryToken(i);
            return;
        }
    }
}

}  // namespace relulens::ui
