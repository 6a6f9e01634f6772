#include "ui/predictions_view.h"

#include <QVBoxLayout>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/token_text.h"

namespace relulens::ui {

PredictionsView::PredictionsView(AppState* state, QWidget* parent)
    : ExportableView(state, parent), plot_(new QCustomPlot(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(plot_);
    plot_->plotLayout()->insertRow(0);
    heading_ = new QCPTextElement(plot_, "", QFont(font().family(), 9, QFont::Bold));
    plot_->plotLayout()->addElement(0, 0, heading_);
    bars_ = new QCPBars(plot_->yAxis, plot_->xAxis);
    bars_->setBrush(QColor(60, 110, 190));
    bars_->setPen(Qt::NoPen);
    // With overrides, the unchanged model's top-k below the changed one's.
    unchangedBars_ = new QCPBars(plot_->yAxis, plot_->xAxis);
    unchangedBars_->setBrush(QColor(150, 150, 150));
    unchangedBars_->setPen(Qt::NoPen);
    plot_->yAxis->setRangeReversed(true);
    plot_->xAxis->setLabel("probability");
    connect(state_, &AppState::resultChanged, this, &PredictionsView::refresh);
    connect(state_, &AppState::queryChanged, this, &PredictionsView::refresh);
}

int PredictionsView::position() const {
    auto result = state_->result();
    if (!result || result->tokens.empty()) return -1;
    const int q = state_->queryToken();
    return q >= 0 ? q : int(result->tokens.size()) - 1;
}

void PredictionsView::refresh() {
    auto result = state_->result();
    const int p = position();
    if (!result || p < 0 || p >= int(result->predictions.size())) return;
    const auto& top = result->predictions[size_t(p)];
    QVector<double> keys, values;
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    double maxP = 0;
    for (int i = 0; i < int(top.size()); ++i) {
        keys << i;
        values << top[size_t(i)].probability;
        maxP = std::max(maxP, top[size_t(i)].probability);
        QString piece = QString::fromStdString(top[size_t(i)].readable);
        ticker->addTick(i, QString("%1  %2").arg(piece).arg(top[size_t(i)].probability, 0, 'f', 3));
    }
    bars_->setData(keys, values);
    QVector<double> unchangedKeys, unchangedValues;
    int rows = int(top.size());
    const bool changed = result->effect && p < int(result->effect->unchangedPredictions.size());
    if (changed) {
        const auto& before = result->effect->unchangedPredictions[size_t(p)];
        const int first = int(top.size()) + 1;  // one empty row between the two lists
        for (int i = 0; i < int(before.size()); ++i) {
            unchangedKeys << first + i;
            unchangedValues << before[size_t(i)].probability;
            maxP = std::max(maxP, before[size_t(i)].probability);
            ticker->addTick(first + i, QString("%1  %2")
                                           .arg(QString::fromStdString(before[size_t(i)].readable))
                                           .arg(before[size_t(i)].probability, 0, 'f', 3));
        }
        rows = first + int(before.size());
    }
    unchangedBars_->setData(unchangedKeys, unchangedValues);
    plot_->yAxis->setTicker(ticker);
    plot_->yAxis->setRange(-0.6, rows - 0.4);
    plot_->xAxis->setRange(0, std::max(0.05, maxP * 1.1));
    setHeading(heading_,
               QString("Next token after ‘%1’ (position %2)\n%3%4")
                   .arg(tokenLabel(*result, p))
                   .arg(p)
                   .arg(state_->provenance())
                   .arg(changed ? "\nblue: with the overrides; grey, below: without them" : ""));
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString PredictionsView::csv() const {
    auto result = state_->result();
    const int p = position();
    if (!result || p < 0) return QString();
    QString out = "position,rank,id,piece,probability\n";
    const auto& top = result->predictions[size_t(p)];
    for (size_t i = 0; i < top.size(); ++i) {
        QString piece = QString::fromStdString(top[i].piece);
        out += QString("%1,%2,%3,\"%4\",%5\n")
                   .arg(p)
                   .arg(i + 1)
                   .arg(top[i].id)
                   .arg(piece.replace("\"", "\"\""))
                   .arg(top[i].probability, 0, 'g', 8);
    }
    return out;
}

void PredictionsView::renderFigure(QCPPainter* painter, const QSize& size) {
    plot_->toPainter(painter, size.width(), size.height());
}

}  // namespace relulens::ui
