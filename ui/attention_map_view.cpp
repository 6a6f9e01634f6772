#include "ui/attention_map_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QToolTip>
#include <QVBoxLayout>

#include "qcustomplot.h"
#include "ui/colour_maps.h"
#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/token_text.h"

namespace relulens::ui {

AttentionMapView::AttentionMapView(AppState* state, QWidget* parent)
    : ExportableView(state, parent), plot_(new QCustomPlot(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    auto* controls = new QHBoxLayout;
    scaleMode_ = new QComboBox(this);
    scaleMode_->addItems({"linear colour scale", "log colour scale"});
    controls->addWidget(new QLabel("Scale:", this));
    controls->addWidget(scaleMode_);
    controls->addStretch();
    layout->addLayout(controls);
    layout->addWidget(plot_, 1);
    connect(scaleMode_, qOverload<int>(&QComboBox::currentIndexChanged), this,
            [this](int index) { setLogScale(index == 1); });

    plot_->plotLayout()->insertRow(0);
    heading_ = new QCPTextElement(plot_, "", QFont(font().family(), 10, QFont::Bold));
    plot_->plotLayout()->addElement(0, 0, heading_);
    map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
    map_->setInterpolate(false);
    scale_ = new QCPColorScale(plot_);
    plot_->plotLayout()->addElement(1, 1, scale_);
    scale_->setType(QCPAxis::atRight);
    map_->setColorScale(scale_);
    map_->setGradient(viridisGradient());
    auto* margins = new QCPMarginGroup(plot_);
    plot_->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
    scale_->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
    plot_->yAxis->setRangeReversed(true);
    plot_->xAxis->setLabel("key token");
    plot_->yAxis->setLabel("query token");
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    row_ = new QCPItemRect(plot_);
    row_->setPen(QPen(QColor(230, 40, 40), 2));
    row_->setBrush(Qt::NoBrush);
    row_->setVisible(false);
    plot_->installEventFilter(this);
    plot_->setMouseTracking(true);
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
        const QPoint cell = cellAt(event->pos());
        if (cell.y() >= 0) state_->setQueryToken(cell.y());
    });
    connect(state_, &AppState::resultChanged, this, &AttentionMapView::refresh);
    connect(state_, &AppState::selectionChanged, this, &AttentionMapView::refresh);
}

void AttentionMapView::setLogScale(bool log) {
    if (log == log_) return;
    log_ = log;
    scaleMode_->setCurrentIndex(log ? 1 : 0);
    refresh();
}

QPoint AttentionMapView::cellAt(const QPoint& position) const {
    if (size_ == 0 || !plot_->axisRect()->rect().contains(position)) return {-1, -1};
    const int key = int(std::lround(plot_->xAxis->pixelToCoord(position.x())));
    const int query = int(std::lround(plot_->yAxis->pixelToCoord(position.y())));
    if (key < 0 || query < 0 || key >= size_ || query >= size_) return {-1, -1};
    return {key, query};
}

QString AttentionMapView::tooltipAt(int query, int key) const {
    auto result = state_->result();
    if (!result || query < 0 || key < 0 || query >= size_ || key >= size_) return QString();
    const auto weights = headWeights(*result, state_->layer(), state_->head());
    const auto scores = headScores(*result, state_->layer(), state_->head());
    QString text = QString("query %1 ‘%2’ → key %3 ‘%4’\n")
                       .arg(query).arg(tokenLabel(*result, query)).arg(key)
                       .arg(tokenLabel(*result, key));
    if (key > query) return text + "masked: a query sees only keys at or before it";
    text += QString("weight %1").arg(weights[query][key].item<double>(), 0, 'g', 6);
    if (scores.defined()) {
        text += QString("\nraw score %1").arg(scores[query][key].item<double>(), 0, 'g', 6);
    }
    return text;
}

bool AttentionMapView::eventFilter(QObject* watched, QEvent* event) {
    if (watched == plot_ && event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QPoint cell = cellAt(help->pos());
        if (cell.x() >= 0) {
            QToolTip::showText(help->globalPos(), tooltipAt(cell.y(), cell.x()), plot_);
        } else {
            QToolTip::hideText();
        }
        return true;
    }
    return ExportableView::eventFilter(watched, event);
}

void AttentionMapView::refresh() {
    auto result = state_->result();
    if (!result) return;
    const auto weights = headWeights(*result, state_->layer(), state_->head());
    if (!weights.defined()) return;
    const int L = int(weights.size(0));
    const bool sizeChanged = L != size_;
    size_ = L;
    auto* data = map_->data();
    data->setSize(L, L);
    data->setRange(QCPRange(0, L - 1), QCPRange(0, L - 1));
    const auto w = weights.contiguous();
    const float* values = w.data_ptr<float>();
    double maxValue = 0, minPositive = 1e30, minValue = 0;
    for (int q = 0; q < L; ++q) {
        for (int k = 0; k < L; ++k) {
            if (k > q) {
                data->setCell(k, q, std::numeric_limits<double>::quiet_NaN());
                continue;
            }
            const double v = values[q * L + k];
            data->setCell(k, q, v);
            maxValue = std::max(maxValue, v);
            minValue = std::min(minValue, v);
            if (v > 0) minPositive = std::min(minPositive, v);
        }
    }
    if (maxValue <= 0) maxValue = 1;
    if (log_) {
        const double low = std::max(minPositive, maxValue * 1e-4);
        map_->setDataScaleType(QCPAxis::stLogarithmic);
        scale_->axis()->setScaleType(QCPAxis::stLogarithmic);
        map_->setDataRange(QCPRange(std::min(low, maxValue * 0.999), maxValue));
        scale_->axis()->setLabel(QString("weight, log scale (%1 – %2; zeros at the bottom colour)")
                                     .arg(low, 0, 'g', 3).arg(maxValue, 0, 'g', 3));
    } else {
        map_->setDataScaleType(QCPAxis::stLinear);
        scale_->axis()->setScaleType(QCPAxis::stLinear);
        map_->setDataRange(QCPRange(minValue, maxValue));
        scale_->axis()->setLabel(QString("weight, linear (%1 – %2)")
                                     .arg(minValue, 0, 'g', 3).arg(maxValue, 0, 'g', 3));
    }
    // Token labels when every token fits (about 11 pixels each); plain indices otherwise.
    const int pixels = std::min(plot_->axisRect()->width(), plot_->axisRect()->height());
    if (L * 11 <= std::max(pixels, 100)) {
        auto tickerX = QSharedPointer<QCPAxisTickerText>::create();
        auto tickerY = QSharedPointer<QCPAxisTickerText>::create();
        for (int i = 0; i < L; ++i) {
            tickerX->addTick(i, tokenLabel(*result, i));
            tickerY->addTick(i, tokenLabel(*result, i));
        }
        plot_->xAxis->setTicker(tickerX);
        plot_->yAxis->setTicker(tickerY);
        plot_->xAxis->setTickLabelRotation(60);
    } else {
        auto integers = QSharedPointer<QCPAxisTickerFixed>::create();
        integers->setTickStep(1);
        integers->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
        plot_->xAxis->setTicker(integers);
        plot_->yAxis->setTicker(integers);
        plot_->xAxis->setTickLabelRotation(0);
    }
    if (sizeChanged) {
        plot_->xAxis->setRange(-0.5, L - 0.5);
        plot_->yAxis->setRange(-0.5, L - 0.5);
    }
    heading_->setText(QString("Layer %1 · %2\n%3")
                          .arg(state_->layer()).arg(headLabel(state_->head()))
                          .arg(state_->provenance()));
    updateSelection();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void AttentionMapView::updateSelection() {
    const int q = state_->queryToken();
    row_->setVisible(q >= 0 && q < size_);
    row_->topLeft->setCoords(-0.5, q - 0.5);
    row_->bottomRight->setCoords(size_ - 0.5, q + 0.5);
}

QString AttentionMapView::csv() const {
    auto result = state_->result();
    if (!result) return QString();
    const auto weights = headWeights(*result, state_->layer(), state_->head());
    const auto scores = headScores(*result, state_->layer(), state_->head());
    QString out = "query,query_token,key,key_token,weight,raw_score\n";
    auto quoted = [](QString s) { return "\"" + s.replace("\"", "\"\"") + "\""; };
    const auto w = weights.contiguous();
    const auto sc = scores.defined() ? scores.contiguous() : torch::Tensor();
    const int L = int(w.size(0));
    for (int q = 0; q < L; ++q) {
        for (int k = 0; k <= q; ++k) {
            out += QString::number(q) + ',' + quoted(tokenLabel(*result, q)) + ',' +
                   QString::number(k) + ',' + quoted(tokenLabel(*result, k)) + ',' +
                   QString::number(w.data_ptr<float>()[q * L + k], 'g', 8) + ',' +
                   (sc.defined() ? QString::number(sc.data_ptr<float>()[q * L + k], 'g', 8)
                                 : QString()) +
                   '\n';
        }
    }
    return out;
}

void AttentionMapView::renderFigure(QCPPainter* painter, const QSize& size) {
    plot_->toPainter(painter, size.width(), size.height());
}

}  // namespace relulens::ui
