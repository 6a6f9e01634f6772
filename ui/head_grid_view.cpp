#include "ui/head_grid_view.h"

#include <QMouseEvent>
#include <QPainter>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/colour_maps.h"

namespace relulens::ui {

namespace {

constexpr int kThumbnail = 96;  // pixels per side; long inputs are max-pooled down to it

QImage thumbnail(const torch::Tensor& map) {
    auto m = map.to(torch::kFloat32);
    const int L = int(m.size(0));
    if (L > kThumbnail) {
        m = std::get<0>(torch::adaptive_max_pool2d(m.unsqueeze(0), {kThumbnail, kThumbnail}))[0];
    }
    m = m.contiguous();
    const int n = int(m.size(0));
    const double top = std::max(1e-12, m.max().item<double>());
    QCPColorGradient gradient = viridisGradient();
    QImage image(n, n, QImage::Format_RGB32);
    const float* p = m.data_ptr<float>();
    for (int q = 0; q < n; ++q) {
        for (int k = 0; k < n; ++k) {
            const bool masked = k > q && n == L;
            image.setPixel(k, q, masked ? qRgb(236, 236, 240)
                                        : gradient.color(p[q * n + k], QCPRange(0, top)));
        }
    }
    return image;
}

}  // namespace

HeadGridView::HeadGridView(AppState* state, QWidget* parent) : ExportableView(state, parent) {
    setMinimumSize(240, 200);
    connect(state_, &AppState::resultChanged, this, &HeadGridView::refresh);
    connect(state_, &AppState::selectionChanged, this, qOverload<>(&QWidget::update));
}

void HeadGridView::refresh() {
    auto result = state_->result();
    if (!result) return;
    layers_ = int(result->model.nLayers);
    heads_ = int(result->model.nHeads);
    thumbnails_.clear();
    for (int l = 0; l < layers_; ++l) {
        for (int h = 0; h < heads_; ++h) {
            auto map = headWeights(*result, l, h);
            thumbnails_.push_back(map.defined() ? thumbnail(map) : QImage());
        }
    }
    update();
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
        painter->drawText(QRect(0, row.top(), 55, row.height()), Qt::AlignCenter, QString("layer %1").arg(l));
        for (int h = 0; h < heads_; ++h) {
            const QRect r = cellRect(size, l, h);
            const QImage& image = thumbnails_.value(l * heads_ + h);
            if (!image.isNull()) painter->drawImage(r, image);
            const bool selected = l == state_->layer() && (state_->head() == h || state_->head() < 0);
            painter->setPen(selected ? QPen(QColor(230, 40, 40), 3) : QPen(QColor(180, 180, 190)));
            painter->setBrush(Qt::NoBrush);
            painter->drawRect(r);
            if (l == 0) {
                painter->setPen(Qt::black);
                painter->drawText(QRect(r.left(), r.top() - 16, r.width(), 14), Qt::AlignCenter,
                                  QString("head %1").arg(h));
            }
        }
    }
}

void HeadGridView::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    paintGrid(&painter, size());
}

void HeadGridView::renderFigure(QCPPainter* painter, const QSize& size) { paintGrid(painter, size); }

void HeadGridView::mousePressEvent(QMouseEvent* event) {
    const QPoint cell = headAt(event->pos());
    if (cell.x() < 0) return;
    state_->setLayer(cell.y());
    state_->setHead(cell.x());
}

QString HeadGridView::csv() const {
    auto result = state_->result();
    if (!result) return QString();
    QString out = "layer,head,query,key,weight\n";
    for (int l = 0; l < layers_; ++l) {
        for (int h = 0; h < heads_; ++h) {
            auto map = headWeights(*result, l, h).contiguous();
            const int L = int(map.size(0));
            for (int q = 0; q < L; ++q) {
                for (int k = 0; k <= q; ++k) {
                    out += QString("%1,%2,%3,%4,%5\n").arg(l).arg(h).arg(q).arg(k)
                               .arg(map.data_ptr<float>()[q * L + k], 0, 'g', 8);
                }
            }
        }
    }
    return out;
}

}  // namespace relulens::ui
