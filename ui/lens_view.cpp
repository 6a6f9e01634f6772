#include "ui/lens_view.h"

#include <QVBoxLayout>

#include <cmath>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/inference_worker.h"
#include "ui/plot_helpers.h"
#include "ui/token_text.h"

namespace relulens::ui {

LensView::LensView(AppState* state, QWidget* parent)
    : ExportableView(state, parent), heat_(new QCustomPlot(this)), top_(new QCustomPlot(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(heat_, 3);
    layout->addWidget(top_, 2);
    const Heatmap heat = addHeatmap(heat_);
    map_ = heat.map;
    heading_ = heat.heading;
    map_->setDataRange(QCPRange(0, 1));
    heat.scale->axis()->setLabel("p(actual next token)");
    heat_->xAxis->setLabel("token (predicting the one after it)");
    heat_->yAxis->setLabel("after layer");
    heat_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    heat_->axisRect()->setRangeZoom(Qt::Horizontal);
    heat_->axisRect()->setRangeDrag(Qt::Horizontal);
    top_->plotLayout()->insertRow(0);
    topHeading_ = new QCPTextElement(top_, QString(), QFont(font().family(), 9, QFont::Bold));
    top_->plotLayout()->addElement(0, 0, topHeading_);
    top_->xAxis->setVisible(false);
    top_->yAxis->setVisible(false);
    connect(heat_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
        auto result = state_->result();
        const int token = int(std::lround(heat_->xAxis->pixelToCoord(event->pos().x())));
        if (result && token >= 0 && token < int(result->tokens.size()))
            state_->setQueryToken(token);
    });
    connect(state_, &AppState::resultChanged, this, &LensView::refresh);
    connect(state_, &AppState::queryChanged, this, &LensView::refreshTop);
}

int LensView::shownToken() const {
    auto result = state_->result();
    if (!result || result->tokens.empty()) return -1;
    const int query = state_->queryToken();
    return query >= 0 && query < int(result->tokens.size()) ? query
                                                            : int(result->tokens.size()) - 1;
}

QColor LensView::drawnColour(int layer, int token) const {
    heat_->replot(QCustomPlot::rpImmediateRefresh);
    const QImage image = heat_->grab().toImage();
    const double ratio = image.devicePixelRatio();
    return image.pixelColor(int(heat_->xAxis->coordToPixel(token) * ratio),
                            int(heat_->yAxis->coordToPixel(layer) * ratio));
}

void LensView::refresh() {
    auto result = state_->result();
    if (!result) return;
    if (!result->lens || result->tokens.size() < 2) {
        map_->data()->clear();
        QString why = "the logit lens needs at least two tokens";
        if (!result->lens) {
            why = int64_t(result->tokens.size()) > InferenceController::kLensMaxTokens
                      ? QString(
                            "the logit lens is computed for texts of up to %1 tokens (this one has "
                            "%2)")
                            .arg(InferenceController::kLensMaxTokens)
                            .arg(result->tokens.size())
                      : QString("the logit lens is computed while this view is open");
        }
        setHeading(heading_, why);
        heat_->replot(QCustomPlot::rpQueuedReplot);
        refreshTop();
        return;
    }
    const auto& p = result->lens->nextTokenProbability;  // (layers, L - 1)
    fillHeatmap(map_, p);
    const int layers = int(p.size(0)), tokens = int(p.size(1));
    heat_->xAxis->setRange(-0.5, tokens - 0.5);
    heat_->yAxis->setRange(-0.5, layers - 0.5);
    auto integerTicks = QSharedPointer<QCPAxisTickerFixed>::create();
    integerTicks->setTickStep(1);
    heat_->yAxis->setTicker(integerTicks);
    setHeading(heading_,
               QString("logit lens: p(actual next token) read from the stream after each layer\n"
                       "(last row: the model's prediction) · %1")
                   .arg(state_->provenance()));
    heat_->replot(QCustomPlot::rpQueuedReplot);
    refreshTop();
}

void LensView::refreshTop() {
    top_->clearItems();
    topLines_.clear();
    auto result = state_->result();
    const int token = shownToken();
    const core::LogitLens::At* at = nullptr;
    if (result && result->lens) {
        for (const auto& entry : result->lens->top) {
            if (entry.position == token) at = &entry;
        }
    }
    if (!at) {
        topHeading_->setText(QString());
        top_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const bool hasNext = token + 1 < int(result->tokens.size());
    topHeading_->setText(
        QString("after “%1” (token %2)%3: each layer's top next tokens")
            .arg(tokenLabel(*result, token))
            .arg(token)
            .arg(hasNext ? QString(", followed by “%1”").arg(tokenLabel(*result, token + 1))
                         : QString()));
    const int layers = int(at->layers.size());
    for (int l = 0; l < layers; ++l) {
        QStringList parts;
        for (const auto& prediction : at->layers[size_t(l)]) {
            const QString piece = QString::fromStdString(prediction.readable);
            parts << QString("%1 %2").arg(piece).arg(prediction.probability, 0, 'f', 3);
            if (parts.size() == 6) break;
        }
        topLines_ << QString("after layer %1:  %2").arg(l).arg(parts.join("   "));
        auto* line = new QCPItemText(top_);
        line->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
        line->position->setType(QCPItemPosition::ptAxisRectRatio);
        line->position->setCoords(0.01, (l + 0.5) / std::max(1, layers));
        line->setText(topLines_.back());
        line->setFont(QFont(font().family(), 9));
    }
    top_->replot(QCustomPlot::rpQueuedReplot);
}

QString LensView::csv() const {
    auto result = state_->result();
    if (!result || !result->lens) return QString();
    QString out = "layer,token,next_token,probability_of_next_token\n";
    const auto& p = result->lens->nextTokenProbability;
    for (int64_t l = 0; l < p.size(0); ++l) {
        for (int64_t i = 0; i < p.size(1); ++i) {
            out += QString("%1,%2,%3,%4\n")
                       .arg(l)
                       .arg(i)
                       .arg(result->tokens[size_t(i + 1)].id)
                       .arg(p[l][i].item<double>(), 0, 'g', 8);
        }
    }
    return out;
}

void LensView::renderFigure(QCPPainter* painter, const QSize& size) {
    paintPlots(painter, size, {heat_, top_}, Qt::Vertical);
}

}  // namespace relulens::ui
