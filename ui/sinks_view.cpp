#include "ui/sinks_view.h"

#include <QVBoxLayout>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/plot_helpers.h"
#include "ui/token_text.h"

namespace relulens::ui {

SinksView::SinksView(AppState* state, QWidget* parent)
    : ExportableView(state, parent), grid_(new QCustomPlot(this)), profile_(new QCustomPlot(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(grid_, 3);
    layout->addWidget(profile_, 2);
    const Heatmap grid = addHeatmap(grid_);
    gridMap_ = grid.map;
    gridHeading_ = grid.heading;
    gridMap_->setDataRange(QCPRange(0, 1));
    grid_->xAxis->setLabel("head");
    grid_->yAxis->setLabel("layer");

    profile_->plotLayout()->insertRow(0);
    profileHeading_ = new QCPTextElement(profile_, QString(), QFont(font().family(), 9));
    profile_->plotLayout()->addElement(0, 0, profileHeading_);
    ratioBars_ = new QCPBars(profile_->xAxis, profile_->yAxis);
    ratioBars_->setName("largest |h| ÷ median |h|");
    ratioBars_->setBrush(QColor(70, 110, 190, 170));
    ratioBars_->setPen(QPen(QColor(40, 70, 140)));
    ratioBars_->setWidth(0.6);
    kurtosis_ = profile_->addGraph(profile_->xAxis, profile_->yAxis2);
    kurtosis_->setName("kurtosis (right axis; 3 for a Gaussian)");
    kurtosis_->setPen(QPen(QColor(220, 120, 30), 2));
    kurtosis_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 6));
    profile_->yAxis->setScaleType(QCPAxis::stLogarithmic);
    profile_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
    profile_->yAxis->setLabel("largest |h| ÷ median |h| (bars)");
    profile_->yAxis2->setVisible(true);
    profile_->yAxis2->setLabel("kurtosis (line; 3 for a Gaussian)");
    profile_->xAxis->setLabel("residual stream entering layer");

    connect(grid_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
        const int head = int(std::lround(grid_->xAxis->pixelToCoord(event->pos().x())));
        const int layer = int(std::lround(grid_->yAxis->pixelToCoord(event->pos().y())));
        auto result = state_->result();
        if (result && layer >= 0 && head >= 0 && layer < result->model.nLayers &&
            head < result->model.nHeads) {
            state_->setLayer(layer);
            state_->setHead(head);
        }
    });
    connect(state_, &AppState::resultChanged, this, &SinksView::refresh);
    connect(state_, &AppState::layerHeadChanged, this, &SinksView::refresh);
}

double SinksView::cellValue(int layer, int head) const {
    auto result = state_->result();
    if (!result) return 0;
    return result->layers[size_t(layer)]
        .attentionDiagnostics.heads[size_t(head)]
        .sink.firstTokenShare;
}

bool SinksView::cellMarkedSink(int layer, int head) const {
    return layer < marked_.size() && head < marked_[layer].size() && marked_[layer][head];
}

double SinksView::profileValue(int layer) const {
    auto result = state_->result();
    if (!result) return 0;
    return result->layers[size_t(layer)].residual.largestOverMedian();
}

void SinksView::refresh() {
    auto result = state_->result();
    if (!result || result->layers.empty() || result->layers[0].attentionDiagnostics.heads.empty())
        return;
    const int layers = int(result->model.nLayers), heads = int(result->model.nHeads);
    auto* data = gridMap_->data();
    data->setSize(heads, layers);
    data->setRange(QCPRange(0, heads - 1), QCPRange(0, layers - 1));
    grid_->clearItems();
    marked_ = QVector<QVector<bool>>(layers, QVector<bool>(heads, false));
    const bool numbers = heads <= 12 && layers <= 24;
    int sinkHeads = 0;
    for (int l = 0; l < layers; ++l) {
        for (int h = 0; h < heads; ++h) {
            const auto& s = result->layers[size_t(l)].attentionDiagnostics.heads[size_t(h)].sink;
            data->setCell(h, l, s.firstTokenShare);
            marked_[l][h] = s.sinkHead;
            sinkHeads += s.sinkHead;
            if (s.sinkHead) {  // outlined, so a sink head stands out whatever its colour
                auto* box = new QCPItemRect(grid_);
                box->topLeft->setCoords(h - 0.46, l - 0.46);
                box->bottomRight->setCoords(h + 0.46, l + 0.46);
                box->setPen(QPen(QColor(255, 255, 255), 2, Qt::DashLine));
            }
            if (!numbers) continue;
            auto* label = new QCPItemText(grid_);
            label->position->setCoords(h, l);
            label->setText(QString::number(s.firstTokenShare, 'f', 2) +
                           (s.sinkHead ? "\nsink" : ""));
            label->setColor(Qt::white);
            label->setBrush(QColor(0, 0, 0, 90));
            label->setFont(QFont(font().family(), 9));
        }
    }
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
        QString("first token's share of each row; outlined: sink heads (mean weight on the first "
                "token > %1): %2 of %3\n%4")
            .arg(result->sinkThreshold)
            .arg(sinkHeads)
            .arg(layers * heads)
            .arg(state_->provenance()));

    QVector<double> x, ratio, kurtosis;
    profile_->clearItems();
    // Where each layer's largest value sits (token and dimension), over its bar while they fit.
    const bool labels = layers <= 12;
    for (int l = 0; l < layers; ++l) {
        const auto& r = result->layers[size_t(l)].residual;
        x << l;
        ratio << std::max(r.largestOverMedian(), 1e-3);
        kurtosis << r.kurtosis;
        if (labels && !r.largest.empty() && r.largest[0].token < int64_t(result->tokens.size())) {
            auto* label = new QCPItemText(profile_);
            label->position->setType(QCPItemPosition::ptPlotCoords);
            label->position->setCoords(l, std::max(r.largestOverMedian(), 1.0));
            label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
            label->setText(QString("“%1” d%2")
                               .arg(tokenLabel(*result, int(r.largest[0].token)))
                               .arg(r.largest[0].dimension));
            label->setFont(QFont(font().family(), 8));
        }
    }
    ratioBars_->setData(x, ratio, true);
    kurtosis_->setData(x, kurtosis, true);
    profile_->xAxis->setTicker(integerTicks);
    profile_->xAxis->setRange(-0.6, layers - 0.4);
    profile_->yAxis->rescale();
    profile_->yAxis->setRange(1, std::max(10.0, profile_->yAxis->range().upper * 2.5));
    profile_->yAxis2->rescale();
    profile_->yAxis2->setRange(0, std::max(4.0, profile_->yAxis2->range().upper * 1.15));
    profileHeading_->setText(
        "massive activations: the residual stream's largest |h| against its "
        "median, per layer (labels: the token and dimension of the largest)");
    grid_->replot(QCustomPlot::rpQueuedReplot);
    profile_->replot(QCustomPlot::rpQueuedReplot);
}

QString SinksView::csv() const {
    auto result = state_->result();
    if (!result) return QString();
    QString out =
        "layer,head,first_token_share,zero_mass_rows,sink_score,sink_head,first_key_norm,"
        "other_key_norm,first_value_norm,other_value_norm,residual_largest_abs,"
        "residual_largest_token,residual_largest_dimension,residual_median_abs,"
        "residual_largest_over_median,residual_kurtosis\n";
    for (size_t l = 0; l < result->layers.size(); ++l) {
        const auto& layer = result->layers[l];
        const auto& r = layer.residual;
        const QString residual = r.largest.empty()
                                     ? QString(",,,,,")
                                     : QString("%1,%2,%3,%4,%5,%6")
                                           .arg(std::abs(r.largest[0].value), 0, 'g', 8)
                                           .arg(r.largest[0].token)
                                           .arg(r.largest[0].dimension)
                                           .arg(r.medianAbs, 0, 'g', 8)
                                           .arg(r.largestOverMedian(), 0, 'g', 8)
                                           .arg(r.kurtosis, 0, 'g', 8);
        for (size_t h = 0; h < layer.attentionDiagnostics.heads.size(); ++h) {
            const auto& s = layer.attentionDiagnostics.heads[h].sink;
            out += QString("%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,")
                       .arg(l)
                       .arg(h)
                       .arg(s.firstTokenShare, 0, 'g', 8)
                       .arg(s.zeroMassRows)
                       .arg(s.sinkScore, 0, 'g', 8)
                       .arg(s.sinkHead ? 1 : 0)
                       .arg(s.firstKeyNorm, 0, 'g', 8)
                       .arg(s.otherKeyNorm, 0, 'g', 8)
                       .arg(s.firstValueNorm, 0, 'g', 8)
                       .arg(s.otherValueNorm, 0, 'g', 8) +
                   residual + "\n";
        }
    }
    return out;
}

void SinksView::renderFigure(QCPPainter* painter, const QSize& size) {
    const int top = int(size.height() * 0.6);
    painter->save();
    grid_->toPainter(painter, size.width(), top);
    painter->translate(0, top);
    profile_->toPainter(painter, size.width(), size.height() - top);
    painter->restore();
}

}  // namespace relulens::ui
