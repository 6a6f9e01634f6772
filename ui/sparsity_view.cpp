#include "ui/sparsity_view.h"

#include <QComboBox>

#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/override_menu.h"
#include "ui/plot_helpers.h"
#include "ui/token_text.h"

namespace relulens::ui {

namespace {

const char* kMetricNames[] = {"sparsity", "entropy (nats)", "row mass", "top-1 share"};

}  // namespace

SparsityView::SparsityView(AppState* state, QWidget* parent)
    : ExportableView(state, parent), grid_(new QCustomPlot(this)), tokens_(new QCustomPlot(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    auto* controls = new QHBoxLayout;
    metricBox_ = new QComboBox(this);
    for (const char* name : kMetricNames) metricBox_->addItem(name);
    controls->addWidget(new QLabel("Show:", this));
    controls->addWidget(metricBox_);
    controls->addStretch();
    layout->addLayout(controls);
    layout->addWidget(grid_, 3);
    layout->addWidget(tokens_, 2);
    const Heatmap grid = addHeatmap(grid_), tokens = addHeatmap(tokens_);
    gridMap_ = grid.map;
    gridHeading_ = grid.heading;
    tokenMap_ = tokens.map;
    tokenHeading_ = tokens.heading;
    grid_->xAxis->setLabel("head");
    grid_->yAxis->setLabel("layer");
    tokens_->xAxis->setLabel("query token");
    tokens_->yAxis->setLabel("layer");
    tokens_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    tokens_->axisRect()->setRangeZoom(Qt::Horizontal);
    tokens_->axisRect()->setRangeDrag(Qt::Horizontal);
    connect(metricBox_, qOverload<int>(&QComboBox::currentIndexChanged), this,
            [this](int index) { setMetric(Metric(index)); });
    connect(grid_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
        const int head = int(std::lround(grid_->xAxis->pixelToCoord(event->pos().x())));
        const int layer = int(std::lround(grid_->yAxis->pixelToCoord(event->pos().y())));
        if (state_->result() && layer >= 0 && head >= 0 &&
            layer < state_->result()->model.nLayers && head < state_->result()->model.nHeads) {
            state_->setLayer(layer);
            state_->setHead(head);
            if (event->button() == Qt::RightButton) {
                overrideMenu(state_, layer, head, this)->popup(event->globalPosition().toPoint());
            }
        }
    });
    connect(tokens_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this] { fillTokens(); });
    connect(state_, &AppState::resultChanged, this, &SparsityView::refresh);
    connect(state_, &AppState::layerHeadChanged, this, &SparsityView::refresh);
}

void SparsityView::setMetric(Metric metric) {
    metric_ = metric;
    metricBox_->setCurrentIndex(int(metric));
    refresh();
}

double SparsityView::cellValue(int layer, int head) const {
    auto result = state_->result();
    if (!result) return 0;
    const auto& d = result->layers[size_t(layer)].attentionDiagnostics.heads[size_t(head)];
    switch (metric_) {
        case Metric::Sparsity:
            return d.sparsity;
        case Metric::Entropy:
            return d.entropy;
        case Metric::RowMass:
            return d.rowMass;
        case Metric::TopRatio:
            return d.topShare;
    }
    return 0;
}

void SparsityView::refresh() {
    auto result = state_->result();
    if (!result || result->layers.empty() || result->layers[0].attentionDiagnostics.heads.empty())
        return;
    const int layers = int(result->model.nLayers), heads = int(result->model.nHeads);
    const auto rule = core::attentionSparsityRule(result->run, result->model.nLayers,
                                                  result->model.nHeads, result->tauScale);
    const QString ruleText =
        "share of visible weights " + QString::fromStdString(core::sparsityRuleText(rule, "n_i"));
    const QString metricText =
        metric_ == Metric::Sparsity ? ruleText : QString(kMetricNames[int(metric_)]);

    auto* data = gridMap_->data();
    data->setSize(heads, layers);
    data->setRange(QCPRange(0, heads - 1), QCPRange(0, layers - 1));
    grid_->clearItems();
    // Numbers in the cells only while cells can hold them (models with many heads show colours;
    // the CSV export has the values).
    const bool numbers = heads <= 12 && layers <= 24;
    for (int l = 0; l < layers; ++l) {
        for (int h = 0; h < heads; ++h) {
            const double v = cellValue(l, h);
            data->setCell(h, l, v);
            if (!numbers) continue;
            auto* label = new QCPItemText(grid_);
            label->position->setCoords(h, l);
            label->setText(QString::number(v, 'f', metric_ == Metric::Entropy ? 2 : 3));
            label->setColor(Qt::white);
            label->setBrush(QColor(0, 0, 0, 90));
            label->setFont(QFont(font().family(), 9));
        }
    }
    gridMap_->rescaleDataRange(true);
    if (metric_ == Metric::Sparsity || metric_ == Metric::TopRatio)
        gridMap_->setDataRange(QCPRange(0, 1));
    auto* selected = new QCPItemRect(grid_);
    const int head = std::max(0, state_->head());
    selected->topLeft->setCoords(state_->head() < 0 ? -0.5 : head - 0.5, state_->layer() - 0.5);
    selected->bottomRight->setCoords(state_->head() < 0 ? heads - 0.5 : head + 0.5,
                                     state_->layer() + 0.5);
    selected->setPen(QPen(QColor(230, 40, 40), 2));
    grid_->xAxis->setRange(-0.5, heads - 0.5);
    grid_->yAxis->setRange(-0.5, layers - 0.5);
    auto integerTicks = QSharedPointer<QCPAxisTickerFixed>::create();
    integerTicks->setTickStep(1);
    grid_->xAxis->setTicker(integerTicks);
    grid_->yAxis->setTicker(integerTicks);
    gridHeading_->setText(
        QString("%1 per layer and head\n%2").arg(metricText, state_->provenance()));

    // Tokens × layers for the selected head: per-token sparsity (or entropy).
    const bool entropy = metric_ == Metric::Entropy;
    const int L = int(result->tokens.size());
    tokenRows_.assign(size_t(layers), {});
    for (int l = 0; l < layers; ++l) {
        auto rows = (entropy ? rowEntropy(*result, l, state_->head())
                             : rowSparsity(*result, l, state_->head()))
                        .contiguous();
        const float* p = rows.data_ptr<float>();
        tokenRows_[size_t(l)].assign(p, p + L);
    }
    tokenHeadingText_ = QString("per query token, %1 (%2)")
                            .arg(headLabel(state_->head()), entropy ? "entropy" : "sparsity");
    tokens_->xAxis->setRange(-0.5, L - 0.5);
    fillTokens();
    tokenMap_->rescaleDataRange(true);
    if (!entropy) tokenMap_->setDataRange(QCPRange(0, 1));
    tokens_->yAxis->setRange(-0.5, layers - 0.5);
    tokens_->yAxis->setTicker(integerTicks);
    grid_->replot(QCustomPlot::rpQueuedReplot);
    tokens_->replot(QCustomPlot::rpQueuedReplot);
}

double SparsityView::tokenCellValue(int layer, int token) const {
    return tokenMap_->data()->data(token, layer);
}

void SparsityView::fillTokens() {
    if (tokenRows_.empty() || tokenRows_[0].empty()) return;
    const int layers = int(tokenRows_.size()), L = int(tokenRows_[0].size());
    const QCPRange view = tokens_->xAxis->range();
    int lo = std::clamp(int(std::floor(view.lower + 0.5)), 0, L - 1);
    int hi = std::clamp(int(std::ceil(view.upper - 0.5)), lo, L - 1);
    if (hi == lo && L > 1) {  // two cells at least: a one-cell map has no width
        if (hi + 1 < L)
            ++hi;
        else
            --lo;
    }
    const int n = hi - lo + 1;
    const int budget = std::max(1024, tokens_->axisRect()->width());
    const int block = (n + budget - 1) / budget;
    const int cells = (n + block - 1) / block;
    auto* data = tokenMap_->data();
    data->setSize(cells, layers);
    const double first = lo + (block - 1) / 2.0;
    data->setRange(QCPRange(first, cells > 1 ? first + (cells - 1) * block : first + 1),
                   QCPRange(0, std::max(1, layers - 1)));
    for (int l = 0; l < layers; ++l) {
        const float* row = tokenRows_[size_t(l)].data();
        for (int c = 0; c < cells; ++c) {
            const int begin = lo + c * block, end = std::min(hi + 1, begin + block);
            double sum = 0;
            for (int i = begin; i < end; ++i) sum += row[i];
            data->setCell(c, l, sum / (end - begin));
        }
    }
    tokenHeading_->setText(block > 1 ? tokenHeadingText_ +
                                           QString(", mean of %1 tokens per cell").arg(block)
                                     : tokenHeadingText_);
    tokens_->replot(QCustomPlot::rpQueuedReplot);
}

QString SparsityView::csv() const {
    auto result = state_->result();
    if (!result) return QString();
    QString out =
        "layer,head,sparsity,sparsity_rule,entropy,row_mass,row_mass_std,top1_share,top1pct_"
        "share\n";
    const auto rule = core::attentionSparsityRule(result->run, result->model.nLayers,
                                                  result->model.nHeads, result->tauScale);
    const QString ruleText = QString::fromStdString(core::sparsityRuleText(rule, "n_i", true));
    for (size_t l = 0; l < result->layers.size(); ++l) {
        const auto& heads = result->layers[l].attentionDiagnostics.heads;
        for (size_t h = 0; h < heads.size(); ++h) {
            const auto& d = heads[h];
            out += QString("%1,%2,%3,%4,%5,%6,%7,%8,%9\n")
                       .arg(l)
                       .arg(h)
                       .arg(d.sparsity, 0, 'g', 8)
                       .arg(ruleText)
                       .arg(d.entropy, 0, 'g', 8)
                       .arg(d.rowMass, 0, 'g', 8)
                       .arg(d.rowMassStd, 0, 'g', 8)
                       .arg(d.topShare, 0, 'g', 8)
                       .arg(d.topOnePercentShare, 0, 'g', 8);
        }
    }
    return out;
}

void SparsityView::renderFigure(QCPPainter* painter, const QSize& size) {
    const int top = int(size.height() * 0.6);
    painter->save();
    grid_->toPainter(painter, size.width(), top);
    painter->translate(0, top);
    tokens_->toPainter(painter, size.width(), size.height() - top);
    painter->restore();
}

}  // namespace relulens::ui
