#include "ui/memory_slots_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QVBoxLayout>
#include <limits>

#include "ui/app_state.h"
#include "ui/token_text.h"

namespace relulens::ui {

namespace {
constexpr int kMaxHeatmapRows = 512;  // token rows drawn at most; longer texts are max-pooled
}  // namespace

MemorySlotsView::MemorySlotsView(AppState* state, QWidget* parent)
    : ExportableView(state, parent), heat_(new QCustomPlot(this)), bars_(new QCustomPlot(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    auto* controls = new QHBoxLayout;
    orderBox_ = new QComboBox(this);
    orderBox_->addItems({"slot index", "total activation", "most selective"});
    orderBox_->setCurrentIndex(1);
    controls->addWidget(new QLabel("Order slots by:", this));
    controls->addWidget(orderBox_);
    controls->addStretch();
    layout->addLayout(controls);
    auto* row = new QHBoxLayout;
    row->addWidget(heat_, 3);
    auto* side = new QVBoxLayout;
    side->addWidget(bars_, 2);
    details_ = new QLabel(this);
    details_->setWordWrap(true);
    details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    details_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    side->addWidget(details_, 1);
    row->addLayout(side, 2);
    layout->addLayout(row, 1);

    map_ = addHeatmap(heat_);
    heat_->xAxis->setLabel("memory slot (ordered)");
    heat_->yAxis->setLabel("token");
    heat_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    bars_->plotLayout()->insertRow(0);
    barsHeading_ = new QCPTextElement(bars_, "", QFont(font().family(), 9, QFont::Bold));
    bars_->plotLayout()->addElement(0, 0, barsHeading_);
    topSlots_ = new QCPBars(bars_->yAxis, bars_->xAxis);
    topSlots_->setBrush(QColor(200, 120, 40));
    topSlots_->setPen(Qt::NoPen);
    bars_->yAxis->setRangeReversed(true);
    bars_->xAxis->setLabel("activation m_ti");
    connect(orderBox_, qOverload<int>(&QComboBox::currentIndexChanged), this,
            [this](int index) { setOrder(Order(index)); });
    connect(heat_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
        const int column = int(std::lround(heat_->xAxis->pixelToCoord(event->pos().x())));
        const int token = int(std::lround(heat_->yAxis->pixelToCoord(event->pos().y())));
        if (slotAtColumn(column) >= 0) state_->setSlot(slotAtColumn(column));
        if (auto r = state_->result(); r && token >= 0 && token < int(r->tokens.size())) {
            state_->setQueryToken(token);
        }
    });
    connect(state_, &AppState::resultChanged, this, &MemorySlotsView::refresh);
    connect(state_, &AppState::layerHeadChanged, this, &MemorySlotsView::refresh);
    connect(state_, &AppState::queryChanged, this, &MemorySlotsView::refreshSelection);
    connect(state_, &AppState::slotChanged, this, &MemorySlotsView::refreshSelection);
}

void MemorySlotsView::setOrder(Order order) {
    orderRule_ = order;
    orderBox_->setCurrentIndex(int(order));
    refresh();
}

void MemorySlotsView::refresh() {
    Figure wanted = wantedFigure();
    if (!wanted.result) return;
    if (wanted.same(shown_)) {
        channel_.supersede();
        refreshSelection();
        return;
    }
    MapJobs::instance().post<Figure>(
        channel_, this, [wanted] { return computeFigure(wanted); },
        [this](Figure done) { applyFigure(std::move(done)); });
    refreshSelection();  // the token's top slots come from one row: drawn now
}

MemorySlotsView::Figure MemorySlotsView::wantedFigure() const {
    Figure f;
    auto result = state_->result();
    if (!result || state_->layer() >= int(result->layers.size())) return f;
    if (!result->layers[size_t(state_->layer())].slotActivations.defined()) return f;
    f.result = result;
    f.layer = state_->layer();
    f.rule = orderRule_;
    return f;
}

MemorySlotsView::Figure MemorySlotsView::computeFigure(Figure f) {
    const auto& activations = f.result->layers[size_t(f.layer)].slotActivations;  // (L, d_ff)
    const int L = int(activations.size(0)), N = int(activations.size(1));
    torch::Tensor key;
    if (f.rule == Order::Total) key = activations.sum(0);
    // Selectivity: the share of a slot's total activation on its single strongest token.
    if (f.rule == Order::Selective)
        key = activations.clamp_min(0).amax(0) / (activations.clamp_min(0).sum(0) + 1e-9);
    f.order.resize(N);
    if (key.defined()) {
        auto sorted = std::get<1>(key.sort(0, /*descending=*/true)).contiguous();
        for (int i = 0; i < N; ++i) f.order[i] = int(sorted.data_ptr<int64_t>()[i]);
    } else {
        for (int i = 0; i < N; ++i) f.order[i] = i;
    }
    auto index = torch::tensor(std::vector<int64_t>(f.order.begin(), f.order.end()));
    // A long text has more tokens than the heatmap has pixel rows: each row of cells shows the
    // maximum over its block of tokens (8 M cells for 10,744 tokens stalled the window).
    auto shown = activations;
    f.block = (L + kMaxHeatmapRows - 1) / kMaxHeatmapRows;
    if (f.block > 1) {
        const int rows = (L + f.block - 1) / f.block;
        shown = torch::constant_pad_nd(activations, {0, 0, 0, rows * f.block - L},
                                       -std::numeric_limits<float>::infinity())
                    .view({rows, f.block, N})
                    .amax(1);
    }
    f.shown = shown.index_select(1, index).to(torch::kFloat32).contiguous();
    f.cells = regionHeatmapCells(f.shown, 0, int64_t(f.shown.size(0)) * f.block, 0, N);
    return f;
}

void MemorySlotsView::ensureCurrentFigure() {
    Figure wanted = wantedFigure();
    if (!wanted.result || wanted.same(shown_)) return;
    channel_.supersede();
    applyFigure(computeFigure(std::move(wanted)));
}

void MemorySlotsView::applyFigure(Figure f) {
    if (!f.shown.defined() || f.result != state_->result()) return;
    shown_ = std::move(f);
    order_ = shown_.order;
    const auto& result = shown_.result;
    const int N = int(shown_.shown.size(1));
    const int L = int(result->layers[size_t(shown_.layer)].slotActivations.size(0));
    showHeatmapCells(map_.map, shown_.cells);
    map_.map->rescaleDataRange(true);
    heat_->xAxis->setRange(-0.5, N - 0.5);
    heat_->yAxis->setRange(-0.5, L - 0.5);
    setHeading(
        map_.heading,
        QString("Layer %1 memory: %2 tokens × %3 slots, FFN %4%5%6")
            .arg(shown_.layer)
            .arg(L)
            .arg(N)
            .arg(QString::fromStdString(core::ffnKindName(result->run.ffn)))
            .arg(result->trainedWithRun ? "" : " (swapped)")
            .arg(shown_.block > 1 ? QString("; each row the max over %1 tokens").arg(shown_.block)
                                  : QString()));
    map_.scale->axis()->setLabel("m_ti");
    heat_->replot(QCustomPlot::rpQueuedReplot);
}

void MemorySlotsView::refreshSelection() {
    auto result = state_->result();
    if (!result || state_->layer() >= int(result->layers.size())) return;
    const auto& activations = result->layers[size_t(state_->layer())].slotActivations;  // (L, d_ff)
    if (!activations.defined()) return;
    const int L = int(activations.size(0)), N = int(activations.size(1));
    const int token = state_->queryToken() >= 0 ? state_->queryToken() : L - 1;
    auto [values, ids] = activations[token].topk(std::min(10, N));
    values = values.contiguous();
    ids = ids.contiguous();
    QVector<double> keys, heights;
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (int i = 0; i < int(values.size(0)); ++i) {
        keys << i;
        heights << values.data_ptr<float>()[i];
        ticker->addTick(i, QString("slot %1").arg(ids.data_ptr<int64_t>()[i]));
    }
    topSlots_->setData(keys, heights);
    bars_->yAxis->setTicker(ticker);
    bars_->yAxis->setRange(-0.6, values.size(0) - 0.4);
    bars_->xAxis->setRange(0, std::max(1e-6, heights.isEmpty() ? 1.0 : heights.front() * 1.1));
    barsHeading_->setText(
        QString("Top slots of ‘%1’ (token %2)").arg(tokenLabel(*result, token)).arg(token));
    topSlotOfToken_ = ids.numel() > 0 ? int(ids.data_ptr<int64_t>()[0]) : -1;
    details_->setText(slotDescription());
    bars_->replot(QCustomPlot::rpQueuedReplot);
}

QString MemorySlotsView::slotDescription() const {
    auto result = state_->result();
    const int slot = state_->slot() >= 0 ? state_->slot() : topSlotOfToken_;
    if (!result || slot < 0) return "Click a column of the heatmap to pick a slot.";
    const auto& activations = result->layers[size_t(state_->layer())].slotActivations;
    if (!activations.defined() || slot >= activations.size(1)) return QString();
    auto column = activations.select(1, slot);
    auto [values, tokens] = column.topk(std::min<int64_t>(8, column.size(0)));
    QString text = QString("<b>Slot %1, layer %2</b><br>fires on:").arg(slot).arg(state_->layer());
    for (int i = 0; i < int(values.size(0)); ++i) {
        text += QString(" ‘%1’ %2")
                    .arg(tokenLabel(*result, int(tokens[i].item<int64_t>())).toHtmlEscaped())
                    .arg(values[i].item<double>(), 0, 'f', 3);
    }
    if (auto vocabulary = state_->slotVocabulary()) {
        text += "<br>value vector promotes (v·Eᵀ, byte pieces left out):";
        for (const auto& token : vocabulary->promoted(state_->layer(), slot)) {
            text += " ‘" + QString::fromStdString(token.piece).toHtmlEscaped() + "’";
        }
    }
    return text;
}

QString MemorySlotsView::csv() const {
    auto result = state_->result();
    if (!result) return QString();
    const auto& activations = result->layers[size_t(state_->layer())].slotActivations;
    if (!activations.defined()) return QString();
    const auto s = activations.contiguous();
    const int L = int(s.size(0)), N = int(s.size(1));
    QString out = "token,token_text,slot,activation\n";
    for (int t = 0; t < L; ++t) {
        for (int i = 0; i < N; ++i) {
            out += QString("%1,\"%2\",%3,%4\n")
                       .arg(t)
                       .arg(tokenLabel(*result, t).replace("\"", "\"\""))
                       .arg(i)
                       .arg(s.data_ptr<float>()[t * N + i], 0, 'g', 8);
        }
    }
    return out;
}

void MemorySlotsView::renderFigure(QCPPainter* painter, const QSize& size) {
    ensureCurrentFigure();
    const int left = size.width() * 3 / 5;
    painter->save();
    heat_->toPainter(painter, left, size.height());
    painter->translate(left, 0);
    bars_->toPainter(painter, size.width() - left, size.height() * 2 / 3);
    painter->translate(0, size.height() * 2 / 3);
    QTextDocument doc;
    doc.setHtml(slotDescription());
    doc.setTextWidth(size.width() - left - 10);
    doc.drawContents(painter);
    painter->restore();
}

}  // namespace relulens::ui
