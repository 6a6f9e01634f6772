#include "ui/compare_view.h"

#include <cmath>

#include <QHBoxLayout>

#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/colour_maps.h"
#include "ui/map_jobs.h"

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
    connect(state_, &AppState::comparisonChanged, this, &CompareView::refresh);
    connect(state_, &AppState::layerHeadChanged, this, &CompareView::refresh);
}

namespace {

// Cells per side for a map of L tokens in a plot: every entry when it fits, else mean-pooled
// blocks (the mean keeps the difference panel exact: mean(a) − mean(b) = mean(a − b)).
int64_t cellsFor(int64_t L, const QCustomPlot* plot) {
    const int64_t pixels =
        std::max(64, std::min(plot->axisRect()->width(), plot->axisRect()->height()));
    return std::min(L, pixels);
}

}  // namespace

void CompareView::refresh() {
    // Two maps rebuilt on demand cost a second on very long inputs: only when on screen, and
    // on the map thread.
    stale_ = true;
    if (isVisible()) requestPanels();
}

void CompareView::showEvent(QShowEvent* event) {
    ExportableView::showEvent(event);
    if (stale_) requestPanels();
}

CompareView::Panels CompareView::wantedPanels() const {
    Panels p;
    p.result = state_->result();
    p.other = state_->comparison();
    if (!p.result || !p.other || p.other->tokens.size() != p.result->tokens.size()) return Panels{};
    p.layer = state_->layer();
    p.head = state_->head();
    p.cells = cellsFor(int64_t(p.result->tokens.size()), plots_[0]);
    return p;
}

CompareView::Panels CompareView::computePanels(Panels p) {
    const int64_t L = int64_t(p.result->tokens.size());
    p.a =
        p.result->maps->pooled(p.layer, p.head, 0, L, 0, L, p.cells, p.cells, core::Pooling::Mean);
    p.b = p.other->maps->pooled(p.layer, p.head, 0, L, 0, L, p.cells, p.cells, core::Pooling::Mean);
    if (!p.a.defined() || !p.b.defined()) return p;
    const torch::Tensor values[3] = {p.a, p.b, p.a - p.b};
    for (int i = 0; i < 3; ++i) p.shown[i] = regionHeatmapCells(values[i], 0, L, 0, L);
    const auto range = core::valueRange(values[2]);
    p.differenceSpan = std::max(1e-9, range.any ? std::max(-range.min, range.max) : 0.0);
    return p;
}

void CompareView::requestPanels() {
    Panels wanted = wantedPanels();
    if (!wanted.result) return;
    stale_ = false;
    MapJobs::instance().post<Panels>(
        channel_, this, [wanted] { return computePanels(wanted); },
        [this](Panels done) { draw(done); });
}

void CompareView::draw(const Panels& p) {
    if (!p.a.defined() || !p.b.defined()) return;
    const auto& result = p.result;
    const auto& other = p.other;
    const int64_t L = int64_t(result->tokens.size());
    const int layer = p.layer, head = p.head;
    const QString names[3] = {QString::fromStdString(result->run.attention.label()),
                              QString::fromStdString(other->run.attention.label()),
                              QString("difference (%1 − %2)")
                                  .arg(QString::fromStdString(result->run.attention.label()),
                                       QString::fromStdString(other->run.attention.label()))};
    const int64_t block = (L + p.cells - 1) / p.cells;
    const QString pooled =
        block > 1 ? QString(" · mean of blocks of up to %1 × %1").arg(block) : QString();
    for (int i = 0; i < 3; ++i) {
        showHeatmapCells(maps_[i].map, p.shown[i]);
        if (i == 2) {
            // symmetric: white is no change
            maps_[i].map->setDataRange(QCPRange(-p.differenceSpan, p.differenceSpan));
        } else {
            maps_[i].map->rescaleDataRange(true);
        }
        setHeading(maps_[i].heading, QString("%1\nlayer %2 · %3%4")
                                         .arg(names[i])
                                         .arg(layer)
                                         .arg(headLabel(result->model, head))
                                         .arg(pooled));
        plots_[i]->xAxis->setRange(-0.5, L - 0.5);
        plots_[i]->yAxis->setRange(-0.5, L - 0.5);
        plots_[i]->replot(QCustomPlot::rpQueuedReplot);
    }
}

QString CompareView::csv() const {
    auto result = state_->result();
    auto other = state_->comparison();
    if (!result || !other || other->tokens.size() != result->tokens.size()) return QString();
    const int64_t L = int64_t(result->tokens.size());
    const int layer = state_->layer(), head = state_->head();
    const QString first = QString::fromStdString(result->run.attention.label());
    const QString second = QString::fromStdString(other->run.attention.label());
    // every entry while that is a sensible file (4 M entries); mean-pooled cells beyond
    const int64_t cells = L * L > 4'000'000 ? cellsFor(L, plots_[0]) : L;
    const auto a = result->maps->pooled(layer, head, 0, L, 0, L, cells, cells, core::Pooling::Mean);
    const auto b = other->maps->pooled(layer, head, 0, L, 0, L, cells, cells, core::Pooling::Mean);
    const int64_t n = a.size(0);
    QString out =
        n == L ? QString("query,key,%1,%2,difference\n").arg(first, second)
               : QString("query_from,query_to,key_from,key_to,%1 (mean),%2 (mean),difference\n")
                     .arg(first, second);
    for (int64_t q = 0; q < n; ++q) {
        for (int64_t k = 0; k < n; ++k) {
            const float x = a[q][k].item<float>(), y = b[q][k].item<float>();
            if (std::isnan(x)) continue;
            const QString where = n == L ? QString("%1,%2").arg(q).arg(k)
                                         : QString("%1,%2,%3,%4")
                                               .arg(core::poolEdge(q, L, n))
                                               .arg(core::poolEdge(q + 1, L, n) - 1)
                                               .arg(core::poolEdge(k, L, n))
                                               .arg(core::poolEdge(k + 1, L, n) - 1);
            out += QString("%1,%2,%3,%4\n")
                       .arg(where)
                       .arg(double(x), 0, 'g', 8)
                       .arg(double(y), 0, 'g', 8)
                       .arg(double(x - y), 0, 'g', 8);
        }
    }
    return out;
}

void CompareView::renderFigure(QCPPainter* painter, const QSize& size) {
    if (stale_ || channel_.pending()) {  // an export draws what is asked, here and now
        channel_.supersede();
        stale_ = false;
        if (Panels wanted = wantedPanels(); wanted.result) draw(computePanels(wanted));
    }
    paintPlots(painter, size, {plots_[0], plots_[1], plots_[2]}, Qt::Horizontal);
}

}  // namespace relulens::ui
