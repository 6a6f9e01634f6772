#include "ui/head_grid_view.h"

#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <cmath>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/colour_maps.h"
#include "ui/map_jobs.h"
#include "ui/override_menu.h"

namespace relulens::ui {

namespace {

// Cells per side; long inputs are max-pooled down to it (it divides the capture's 512-cell
// overview, so thumbnails come straight from it).
constexpr int kThumbnail = 128;

// pooled: (rows, keys) max-pooled weights, NaN where a cell holds only masked entries
QImage thumbnail(const torch::Tensor& pooled) {
    const auto m = pooled.to(torch::kFloat32).contiguous();
    const int rows = int(m.size(0)), keys = int(m.size(1));
    const auto range = core::valueRange(m);
    const double top = std::max(1e-12, range.any ? range.max : 0.0);
    QCPColorGradient gradient = viridisGradient();
    QImage image(keys, rows, QImage::Format_RGB32);
    const float* p = m.data_ptr<float>();
    for (int q = 0; q < rows; ++q) {
        for (int k = 0; k < keys; ++k) {
            const float v = p[q * keys + k];
            image.setPixel(
                k, q, std::isnan(v) ? qRgb(236, 236, 240) : gradient.color(v, QCPRange(0, top)));
        }
    }
    return image;
}

}  // namespace

HeadGridView::HeadGridView(AppState* state, QWidget* parent) : ExportableView(state, parent) {
    setMinimumSize(240, 200);
    connect(state_, &AppState::resultChanged, this, &HeadGridView::refresh);
    connect(state_, &AppState::layerHeadChanged, this, qOverload<>(&QWidget::update));
}

void HeadGridView::refresh() {
    auto result = state_->result();
    if (!result) return;
    // Rebuilding every head's map costs a forward pass's worth of attention on long inputs:
    // only when the grid is on screen (or exported), and on the map thread.
    if (isVisible()) requestThumbnails();
    update();
}

QVector<QImage> HeadGridView::thumbnailsOf(const core::CaptureResult& result) {
    QVector<QImage> images;
    const int64_t L = int64_t(result.tokens.size());
    for (int l = 0; l < int(result.model.nLayers); ++l) {
        for (int h = 0; h < int(result.model.nHeads); ++h) {
            auto map =
                result.maps->pooled(l, h, 0, L, 0, L, kThumbnail, kThumbnail, core::Pooling::Max);
            images.push_back(map.defined() ? thumbnail(map) : QImage());
        }
    }
    return images;
}

void HeadGridView::requestThumbnails() {
    auto result = state_->result();
    if (!result || builtFrom_ == result || requestedFrom_ == result) return;
    requestedFrom_ = result;
    MapJobs::instance().post<QVector<QImage>>(
        channel_, this, [result] { return thumbnailsOf(*result); },
        [this, result](QVector<QImage> images) {
            requestedFrom_.reset();
            setThumbnails(result, std::move(images));
        });
}

void HeadGridView::setThumbnails(std::shared_ptr<const core::CaptureResult> result,
                                 QVector<QImage> images) {
    builtFrom_ = std::move(result);
    layers_ = int(builtFrom_->model.nLayers);
    heads_ = int(builtFrom_->model.nHeads);
    thumbnails_ = std::move(images);
    update();
}

void HeadGridView::buildThumbnails() {
    auto result = state_->result();
    if (!result || builtFrom_ == result) return;
    channel_.supersede();
    requestedFrom_.reset();
    setThumbnails(result, thumbnailsOf(*result));
}

QRect HeadGridView::cellRect(const QSize& size, int layer, int head) const {
    const int top = 40, left = 60;
    const int w = (size.width() - left - 10) / std::max(1, heads_);
    const int h = (size.height() - top - 10) / std::max(1, layers_);
    const int side = std::max(8, std::min(w, h) - 8);
    return QRect(left + head * w + (w - side) / 2, top + layer * h + (h - side) / 2, side, side);
}

QPoint HeadGridView::headAt(const QPoint& position) const {
    for (int l = 0; l < layers_; ++l) {
        for (int h = 0; h < heads_; ++h) {
            if (cellRect(size(), l, h).contains(position)) return {h, l};
        }
    }
    return {-1, -1};
}

void HeadGridView::paintGrid(QPainter* painter, const QSize& size) {
    painter->fillRect(QRect(QPoint(0, 0), size), Qt::white);
    painter->setPen(Qt::black);
    QFont bold = font();
    bold.setBold(true);
    painter->setFont(bold);
    painter->drawText(QRect(0, 2, size.width(), 36), Qt::AlignHCenter | Qt::AlignTop,
                      "Every head, each scaled to its own maximum\n" + state_->provenance());
    painter->setFont(font());
    for (int l = 0; l < layers_; ++l) {
        const QRect row = cellRect(size, l, 0);
        painter->setPen(Qt::black);
        painter->drawText(QRect(0, row.top(), 55, row.height()), Qt::AlignCenter,
                          QString("layer %1").arg(l));
        for (int h = 0; h < heads_; ++h) {
            const QRect r = cellRect(size, l, h);
            const QImage& image = thumbnails_.value(l * heads_ + h);
            if (!image.isNull()) painter->drawImage(r, image);
            const bool selected =
                l == state_->layer() && (state_->head() == h || state_->head() < 0);
            painter->setPen(selected ? QPen(QColor(230, 40, 40), 3) : QPen(QColor(180, 180, 190)));
            painter->setBrush(Qt::NoBrush);
            painter->drawRect(r);
            if (l == 0) {
                // many heads leave narrow cells: the number alone, and only every few heads
                const bool wide = r.width() >= painter->fontMetrics().horizontalAdvance("head 00");
                const int every =
                    std::max(1, int(std::ceil(painter->fontMetrics().horizontalAdvance("00 ") /
                                              double(std::max(1, r.width())))));
                if (h % every == 0) {
                    painter->setPen(Qt::black);
                    painter->drawText(QRect(r.left() - r.width(), r.top() - 16, 3 * r.width(), 14),
                                      Qt::AlignCenter,
                                      wide ? QString("head %1").arg(h) : QString::number(h));
                }
            }
        }
    }
}

void HeadGridView::paintEvent(QPaintEvent*) {
    requestThumbnails();  // painted from the last thumbnails until the new ones arrive
    QPainter painter(this);
    paintGrid(&painter, size());
}

void HeadGridView::renderFigure(QCPPainter* painter, const QSize& size) {
    buildThumbnails();
    paintGrid(painter, size);
}

QString HeadGridView::tooltipAt(const QPoint& position) const {
    const QPoint cell = headAt(position);
    auto result = state_->result();
    if (cell.x() < 0 || !result) return QString();
    return QString("layer %1 · %2").arg(cell.y()).arg(headLabel(result->model, cell.x()));
}

bool HeadGridView::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QString text = tooltipAt(help->pos());
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return ExportableView::event(event);
}

void HeadGridView::mousePressEvent(QMouseEvent* event) {
    const QPoint cell = headAt(event->pos());
    if (cell.x() < 0) return;
    state_->setLayer(cell.y());
    state_->setHead(cell.x());
    if (event->button() == Qt::RightButton) {
        overrideMenu(state_, cell.y(), cell.x(), this)->popup(event->globalPosition().toPoint());
    }
}

QString HeadGridView::csv() const {
    // The cells as drawn: every entry on short inputs, max-pooled blocks on long ones.
    auto result = state_->result();
    if (!result) return QString();
    const int64_t L = int64_t(result->tokens.size());
    QString out = "layer,head,query_from,query_to,key_from,key_to,max_weight\n";
    for (int l = 0; l < layers_; ++l) {
        for (int h = 0; h < heads_; ++h) {
            const auto map =
                result->maps->pooled(l, h, 0, L, 0, L, kThumbnail, kThumbnail, core::Pooling::Max);
            if (!map.defined()) continue;
            const int64_t rows = map.size(0), keys = map.size(1);
            const float* p = map.data_ptr<float>();
            for (int64_t a = 0; a < rows; ++a) {
                for (int64_t b = 0; b < keys; ++b) {
                    if (std::isnan(p[a * keys + b])) continue;
                    out += QString("%1,%2,%3,%4,%5,%6,%7\n")
                               .arg(l)
                               .arg(h)
                               .arg(core::poolEdge(a, L, rows))
                               .arg(core::poolEdge(a + 1, L, rows) - 1)
                               .arg(core::poolEdge(b, L, keys))
                               .arg(core::poolEdge(b + 1, L, keys) - 1)
                               .arg(double(p[a * keys + b]), 0, 'g', 8);
                }
            }
        }
    }
    return out;
}

}  // namespace relulens::ui
