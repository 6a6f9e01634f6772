#include "ui/attention_map_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/colour_maps.h"
#include "ui/map_jobs.h"
#include "ui/plot_helpers.h"
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
    poolingMode_ = new QComboBox(this);
    poolingMode_->addItems({"max pooling", "mean pooling"});
    poolingMode_->setToolTip(
        "When the map has more entries than the plot has pixels, each cell "
        "shows the maximum or the mean of the entries it covers");
    controls->addWidget(new QLabel("Long inputs:", this));
    controls->addWidget(poolingMode_);
    controls->addStretch();
    layout->addLayout(controls);
    layout->addWidget(plot_, 1);
    connect(scaleMode_, qOverload<int>(&QComboBox::currentIndexChanged), this,
            [this](int index) { setLogScale(index == 1); });
    connect(poolingMode_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this](int index) {
        setPooling(index == 1 ? core::Pooling::Mean : core::Pooling::Max);
    });
    refine_.setSingleShot(true);
    refine_.setInterval(30);
    connect(&refine_, &QTimer::timeout, this, &AttentionMapView::refreshTile);

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
    // zooming or panning rebuilds the visible tile once the range settles
    connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), &refine_,
            qOverload<>(&QTimer::start));
    connect(plot_->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), &refine_,
            qOverload<>(&QTimer::start));
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
    connect(state_, &AppState::layerHeadChanged, this, &AttentionMapView::refresh);
    connect(state_, &AppState::queryChanged, this, [this] {
        updateSelection();
        plot_->replot(QCustomPlot::rpQueuedReplot);
    });
}

void AttentionMapView::setLogScale(bool log) {
    if (log == log_) return;
    log_ = log;
    scaleMode_->setCurrentIndex(log ? 1 : 0);
    refresh();
}

void AttentionMapView::setPooling(core::Pooling pooling) {
    if (pooling == pooling_) return;
    pooling_ = pooling;
    poolingMode_->setCurrentIndex(pooling == core::Pooling::Mean ? 1 : 0);
    refreshTile();
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
    const int layer = state_->layer(), head = state_->head();
    QString text = QString("layer %1 · %2\nquery %3 ‘%4’ → key %5 ‘%6’\n")
                       .arg(layer)
                       .arg(headLabel(result->model, head))
                       .arg(query)
                       .arg(tokenLabel(*result, query))
                       .arg(key)
                       .arg(tokenLabel(*result, key));
    if (key > query) return text + "masked: a query sees only keys at or before it";
    if (const int64_t window = result->model.window(layer); window > 0 && key <= query - window) {
        return text + QString("masked: outside this layer's sliding window of %1 keys").arg(window);
    }
    text += QString("weight %1").arg(result->maps->weightAt(layer, head, query, key), 0, 'g', 6);
    const double score = result->maps->scoreAt(layer, head, query, key);
    if (!std::isnan(score)) text += QString("\nraw score %1").arg(score, 0, 'g', 6);
    if (block_ != QSize(1, 1)) {
        text += QString(
                    "\nthe cell under the cursor shows the %1 of up to %2 × %3 entries; zoom in "
                    "for each")
                    .arg(QString::fromStdString(core::poolingName(pooling_)))
                    .arg(block_.height())
                    .arg(block_.width());
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
    const int L = int(result->tokens.size());
    if (L != size_) {
        size_ = L;
        plot_->xAxis->setRange(-0.5, L - 0.5);
        plot_->yAxis->setRange(-0.5, L - 0.5);
        if (pendingZoom_ && pendingZoom_->queryEnd <= L && pendingZoom_->keyEnd <= L)
            setZoom(pendingZoom_);
    }
    setHeading(heading_, QString("Layer %1 · %2\n%3")
                             .arg(state_->layer())
                             .arg(headLabel(result->model, state_->head()))
                             .arg(state_->provenance()));
    refreshTile();
}

std::optional<core::ZoomRegion> AttentionMapView::zoom() const {
    if (size_ == 0) return pendingZoom_;
    const Tile tile = wantedTile();
    if (tile.q0 == 0 && tile.k0 == 0 && tile.q1 == size_ && tile.k1 == size_) return std::nullopt;
    return core::ZoomRegion{tile.q0, tile.q1, tile.k0, tile.k1};
}

void AttentionMapView::setZoom(const std::optional<core::ZoomRegion>& region) {
    pendingZoom_.reset();
    if (!region) {
        if (size_ > 0) {
            plot_->xAxis->setRange(-0.5, size_ - 0.5);
            plot_->yAxis->setRange(-0.5, size_ - 0.5);
        }
        return;
    }
    if (region->queryEnd > size_ || region->keyEnd > size_) {
        pendingZoom_ = region;
        return;
    }
    plot_->xAxis->setRange(region->keyBegin - 0.5, region->keyEnd - 0.5);
    plot_->yAxis->setRange(region->queryBegin - 0.5, region->queryEnd - 0.5);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

AttentionMapView::Tile AttentionMapView::wantedTile() const {
    Tile tile;
    tile.result = state_->result();
    if (!tile.result || size_ == 0) return tile;
    const int64_t L = size_;
    auto clampIndex = [L](double v) { return std::clamp<int64_t>(int64_t(v), 0, L); };
    const QCPRange xr = plot_->xAxis->range(), yr = plot_->yAxis->range();
    tile.k0 = std::min(clampIndex(std::ceil(xr.lower + 0.5 - 1e-9)), L - 1);
    tile.k1 = std::max(tile.k0 + 1, clampIndex(std::floor(xr.upper + 0.5 + 1e-9)));
    tile.q0 = std::min(clampIndex(std::ceil(yr.lower + 0.5 - 1e-9)), L - 1);
    tile.q1 = std::max(tile.q0 + 1, clampIndex(std::floor(yr.upper + 0.5 + 1e-9)));
    const int64_t width = std::max(64, plot_->axisRect()->width());
    const int64_t height = std::max(64, plot_->axisRect()->height());
    tile.outKeys = std::min(tile.k1 - tile.k0, width);
    tile.outRows = std::min(tile.q1 - tile.q0, height);
    tile.layer = state_->layer();
    tile.head = state_->head();
    tile.pooling = pooling_;
    tile.key = QString("%1 %2 %3 %4 %5 %6 %7 %8 %9")
                   .arg(tile.layer)
                   .arg(tile.head)
                   .arg(tile.q0)
                   .arg(tile.q1)
                   .arg(tile.k0)
                   .arg(tile.k1)
                   .arg(tile.outRows)
                   .arg(tile.outKeys)
                   .arg(int(tile.pooling));
    return tile;
}

AttentionMapView::Tile AttentionMapView::computeTile(Tile tile) {
    tile.values = tile.result->maps->pooled(tile.layer, tile.head, tile.q0, tile.q1, tile.k0,
                                            tile.k1, tile.outRows, tile.outKeys, tile.pooling);
    if (!tile.values.defined()) return tile;
    tile.cells = regionHeatmapCells(tile.values, tile.q0, tile.q1, tile.k0, tile.k1);
    const auto range = core::valueRange(tile.values);
    if (range.any) {
        tile.maxValue = range.max;
        tile.minValue = std::min(0.0, range.min);
        if (!std::isnan(range.minPositive)) tile.minPositive = range.minPositive;
    }
    return tile;
}

void AttentionMapView::refreshTile() {
    Tile tile = wantedTile();
    if (!tile.result) return;
    if (shown_.result == tile.result && shown_.key == tile.key) {
        requested_.clear();
        channel_.supersede();
        applyScale();  // the colour scale may have changed
        return;
    }
    // Drawn moments ago (toggling back to a variant seen before): no map work at all.
    for (const auto& recent : recentTiles_) {
        if (recent.matches(tile)) {
            requested_.clear();
            channel_.supersede();
            Tile again = recent.tile;
            again.result = tile.result;
            applyTile(std::move(again));
            return;
        }
    }
    const QString id = requestId(tile);
    if (requested_ == id) return;
    requested_ = id;
    MapJobs::instance().post<Tile>(
        channel_, this, [tile] { return computeTile(tile); },
        [this](Tile done) {
            requested_.clear();
            applyTile(std::move(done));
        });
}

QString AttentionMapView::requestId(const Tile& tile) {
    return QString::number(quintptr(tile.result.get())) + " " + tile.key;
}

void AttentionMapView::ensureCurrentTile() {
    const Tile tile = wantedTile();
    auto shown = [&] { return shown_.result == tile.result && shown_.key == tile.key; };
    if (!tile.result || shown()) return;
    // The map thread is already building this very tile (a view shown and exported at once, as
    // `relulens render` does): wait for its answer rather than build it a second time beside
    // it. Only the map thread's answers run meanwhile, so what is wanted cannot change.
    if (requested_ == requestId(tile)) {
        MapJobs::instance().finish(channel_);
        if (shown()) return;
    }
    channel_.supersede();
    requested_.clear();
    applyTile(computeTile(tile));
}

void AttentionMapView::applyTile(Tile tile) {
    if (!tile.values.defined() || tile.result != state_->result()) return;
    shown_ = std::move(tile);
    auto same = [this](const RecentTile& t) { return t.matches(shown_); };
    recentTiles_.erase(std::remove_if(recentTiles_.begin(), recentTiles_.end(), same),
                       recentTiles_.end());
    RecentTile recent{shown_.result, shown_};
    recent.tile.result.reset();
    recentTiles_.push_back(std::move(recent));
    if (recentTiles_.size() > kRecentTiles) recentTiles_.erase(recentTiles_.begin());
    const auto& t = shown_;
    const auto& result = t.result;
    rowBegin_ = t.q0, rowEnd_ = t.q1, keyBegin_ = t.k0, keyEnd_ = t.k1;
    const int64_t cellsK = t.values.size(1),
                  cellsQ = t.values.size(0);  // the overview may be coarser
    block_ =
        QSize(int((t.k1 - t.k0 + cellsK - 1) / cellsK), int((t.q1 - t.q0 + cellsQ - 1) / cellsQ));
    showHeatmapCells(map_, t.cells);
    applyScale();
    // Token labels when every visible token fits (about 11 pixels each); indices otherwise.
    const int64_t shownTokens = std::max(t.k1 - t.k0, t.q1 - t.q0);
    const int pixels = std::min(plot_->axisRect()->width(), plot_->axisRect()->height());
    if (shownTokens * 11 <= std::max(pixels, 100)) {
        auto tickerX = QSharedPointer<QCPAxisTickerText>::create();
        auto tickerY = QSharedPointer<QCPAxisTickerText>::create();
        for (int64_t i = t.k0; i < t.k1; ++i)
            tickerX->addTick(double(i), tokenLabel(*result, int(i)));
        for (int64_t i = t.q0; i < t.q1; ++i)
            tickerY->addTick(double(i), tokenLabel(*result, int(i)));
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
    updateSelection();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void AttentionMapView::applyScale() {
    const auto& t = shown_;
    if (!t.values.defined()) return;
    const double maxValue = t.maxValue > 0 ? t.maxValue : 1.0;
    const QString pooled = block_ == QSize(1, 1)
                               ? QString()
                               : QString("; each cell the %1 of up to %2 × %3 entries")
                                     .arg(QString::fromStdString(core::poolingName(t.pooling)))
                                     .arg(block_.height())
                                     .arg(block_.width());
    if (log_) {
        const double low = std::max(t.minPositive, maxValue * 1e-4);
        map_->setDataScaleType(QCPAxis::stLogarithmic);
        scale_->axis()->setScaleType(QCPAxis::stLogarithmic);
        map_->setDataRange(QCPRange(std::min(low, maxValue * 0.999), maxValue));
        scale_->axis()->setLabel(
            QString("weight, log scale (%1 – %2; zeros at the bottom colour)%3")
                .arg(low, 0, 'g', 3)
                .arg(maxValue, 0, 'g', 3)
                .arg(pooled));
    } else {
        map_->setDataScaleType(QCPAxis::stLinear);
        scale_->axis()->setScaleType(QCPAxis::stLinear);
        map_->setDataRange(QCPRange(t.minValue, maxValue));
        scale_->axis()->setLabel(QString("weight, linear (%1 – %2)%3")
                                     .arg(t.minValue, 0, 'g', 3)
                                     .arg(maxValue, 0, 'g', 3)
                                     .arg(pooled));
    }
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
    if (!result || rowEnd_ <= rowBegin_) return QString();
    auto quoted = [](QString s) { return "\"" + s.replace("\"", "\"\"") + "\""; };
    const int layer = state_->layer(), head = state_->head();
    const int64_t q0 = rowBegin_, q1 = rowEnd_, k0 = keyBegin_, k1 = keyEnd_;
    // Every visible entry of the shown region while that stays a sensible file (4 M entries,
    // some 200 MB); beyond, the pooled cells as shown.
    if ((q1 - q0) * (k1 - k0) > 4'000'000) {
        const auto values = result->maps->pooled(
            layer, head, q0, q1, k0, k1, (q1 - q0 + block_.height() - 1) / block_.height(),
            (k1 - k0 + block_.width() - 1) / block_.width(), pooling_);
        const QString name = QString::fromStdString(core::poolingName(pooling_));
        QString out = QString("query_from,query_to,key_from,key_to,%1_weight\n").arg(name);
        const int64_t rows = values.size(0), keys = values.size(1);
        for (int64_t a = 0; a < rows; ++a) {
            for (int64_t b = 0; b < keys; ++b) {
                const float v = values[a][b].item<float>();
                if (std::isnan(v)) continue;
                out += QString("%1,%2,%3,%4,%5\n")
                           .arg(q0 + core::poolEdge(a, q1 - q0, rows))
                           .arg(q0 + core::poolEdge(a + 1, q1 - q0, rows) - 1)
                           .arg(k0 + core::poolEdge(b, k1 - k0, keys))
                           .arg(k0 + core::poolEdge(b + 1, k1 - k0, keys) - 1)
                           .arg(double(v), 0, 'g', 8);
            }
        }
        return out;
    }
    const torch::Tensor w = result->maps->weights(layer, head, q0, q1, k0, k1);
    const torch::Tensor sc = result->maps->scores(layer, head, q0, q1, k0, k1);
    if (!w.defined()) return QString();
    QString out = "query,query_token,key,key_token,weight,raw_score\n";
    const int64_t C = k1 - k0;
    const float* wp = w.data_ptr<float>();
    const float* sp = sc.defined() ? sc.data_ptr<float>() : nullptr;
    for (int64_t q = q0; q < q1; ++q) {
        for (int64_t k = k0; k < std::min(k1, q + 1); ++k) {
            const int64_t at = (q - q0) * C + (k - k0);
            out += QString::number(q) + ',' + quoted(tokenLabel(*result, int(q))) + ',' +
                   QString::number(k) + ',' + quoted(tokenLabel(*result, int(k))) + ',' +
                   QString::number(wp[at], 'g', 8) + ',' +
                   (sp ? QString::number(sp[at], 'g', 8) : QString()) + '\n';
        }
    }
    return out;
}

void AttentionMapView::renderFigure(QCPPainter* painter, const QSize& size) {
    ensureCurrentTile();  // an export shows what is asked, not a tile still being built
    plot_->toPainter(painter, size.width(), size.height());
}

}  // namespace relulens::ui
