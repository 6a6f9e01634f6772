#include "ui/compare_view.h"

#include <QHBoxLayout>

#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/colour_maps.h"

namespace relulens::ui {

CompareView::CompareView(AppState* state, QWidget* parent) : ExportableView(state, parent) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    for (int i = 0; i < 3; ++i) {
        plots_[i] = new QCustomPlot(this);
        maps_[i] = addHeatmap(plots_[i]);
        maps_[i].scale->setType(QCPAxis::atBottom);
        plots_[i]->plotLayout()->take(maps_[i].scale);
        plots_[i]->plotLayout()->simplify();
        plots_[i]->plotLayout()->addElement(2, 0, maps_[i].scale);
        plots_[i]->xAxis->setLabel("key");
        plots_[i]->yAxis->setLabel("query");
        plots_[i]->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
        layout->addWidget(plots_[i]);
    }
    maps_[2].map->setGradient(divergingGradient());
    connect(state_, &AppState::resultChanged, this, &CompareView::refresh);
    connect(state_, &AppState::selectionChanged, this, &CompareView::refresh);
}

void CompareView::refresh() {
    auto result = state_->result();
    auto other = state_->comparison();
    if (!result || !other) return;
    const auto a = headWeights(*result, state_->layer(), state_->head());
    const auto b = headWeights(*other, state_->layer(), state_->head());
    if (!a.defined() || !b.defined()) return;
    const torch::Tensor values[3] = {a, b, a - b};
    const QString names[3] = {QString::fromStdString(result->run.attention.label()),
                              QString::fromStdString(other->run.attention.label()),
                              QString("difference (%1 − %2)")
                                  .arg(QString::fromStdString(result->run.attention.label()),
                                       QString::fromStdString(other->run.attention.label()))};
    const int L = int(a.size(0));
    for (int i = 0; i < 3; ++i) {
        fillHeatmap(maps_[i].map, values[i], true);
        if (i == 2) {
            const double span = std::max(1e-9, values[2].abs().max().item<double>());
            maps_[i].map->setDataRange(QCPRange(-span, span));  // symmetric: white is no change
        } else {
            maps_[i].map->rescaleDataRange(true);
        }
        maps_[i].heading->setText(QString("%1\nlayer %2 · %3").arg(names[i]).arg(state_->layer())
                                      .arg(headLabel(state_->head())));
        plots_[i]->xAxis->setRange(-0.5, L - 0.5);
        plots_[i]->yAxis->setRange(-0.5, L - 0.5);
        plots_[i]->replot(QCustomPlot::rpQueuedReplot);
    }
}

QString CompareView::csv() const {
    auto result = state_->result();
    auto other = state_->comparison();
    if (!result || !other) return QString();
    const auto a = headWeights(*result, state_->layer(), state_->head()).contiguous();
    const auto b = headWeights(*other, state_->layer(), state_->head()).contiguous();
    QString out = QString("query,key,%1,%2,difference\n")
                      .arg(QString::fromStdString(result->run.attention.label()),
                           QString::fromStdString(other->run.attention.label()));
    const int L = int(a.size(0));
    for (int q = 0; q < L; ++q) {
        for (int k = 0; k <= q; ++k) {
            const float x = a.data_ptr<float>()[q * L + k], y = b.data_ptr<float>()[q * L + k];
            out += QString("%1,%2,%3,%4,%5\n").arg(q).arg(k).arg(x, 0, 'g', 8).arg(y, 0, 'g', 8)
                       .arg(x - y, 0, 'g', 8);
        }
    }
    return out;
}

void CompareView::renderFigure(QCPPainter* painter, const QSize& size) {
    paintPlots(painter, size, {plots_[0], plots_[1], plots_[2]}, Qt::Horizontal);
}

}  // namespace relulens::ui
