#include "ui/plot_helpers.h"

#include <cmath>

#include "ui/colour_maps.h"

namespace relulens::ui {

Heatmap addHeatmap(QCustomPlot* plot, int titlePointSize) {
    Heatmap h;
    plot->plotLayout()->insertRow(0);
    h.heading =
        new QCPTextElement(plot, "", QFont(plot->font().family(), titlePointSize, QFont::Bold));
    plot->plotLayout()->addElement(0, 0, h.heading);
    h.map = new QCPColorMap(plot->xAxis, plot->yAxis);
    h.map->setInterpolate(false);
    h.scale = new QCPColorScale(plot);
    plot->plotLayout()->addElement(1, 1, h.scale);
    h.map->setColorScale(h.scale);
    h.map->setGradient(viridisGradient());
    auto* margins = new QCPMarginGroup(plot);
    plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
    h.scale->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
    plot->yAxis->setRangeReversed(true);
    return h;
}

void fillHeatmap(QCPColorMap* map, const torch::Tensor& values, bool causalMask) {
    const auto v = values.to(torch::kFloat32).contiguous();
    const int rows = int(v.size(0)), cols = int(v.size(1));
    auto* data = map->data();
    data->setSize(cols, rows);
    data->setRange(QCPRange(0, std::max(1, cols - 1)), QCPRange(0, std::max(1, rows - 1)));
    const float* p = v.data_ptr<float>();
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            data->setCell(c, r,
                          causalMask && c > r ? std::numeric_limits<double>::quiet_NaN()
                                              : double(p[r * cols + c]));
        }
    }
}

HeatmapCells regionHeatmapCells(const torch::Tensor& values, int64_t rowBegin, int64_t rowEnd,
                                int64_t keyBegin, int64_t keyEnd) {
    const auto v = values.to(torch::kFloat32).contiguous();
    const int rows = int(v.size(0)), cols = int(v.size(1));
    // cell c of n over tokens [b, e) is centred at b - 0.5 + (c + 0.5) · (e - b) / n
    auto centres = [](int64_t b, int64_t e, int n) {
        const double step = double(e - b) / n;
        const double first = double(b) - 0.5 + 0.5 * step;
        return QCPRange(first, n > 1 ? first + (n - 1) * step : first + 1e-9);
    };
    auto data = std::make_shared<QCPColorMapData>(cols, rows, centres(keyBegin, keyEnd, cols),
                                                  centres(rowBegin, rowEnd, rows));
    const float* p = v.data_ptr<float>();
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) data->setCell(c, r, double(p[r * cols + c]));
    }
    return data;
}

void showHeatmapCells(QCPColorMap* map, const HeatmapCells& cells) {
    // Copies (the map owns its data): a tile kept for toggling back is shown again later.
    map->setData(const_cast<QCPColorMapData*>(cells.get()), /*copy=*/true);
}

void paintPlots(QCPPainter* painter, const QSize& size, const QList<QCustomPlot*>& plots,
                Qt::Orientation orientation) {
    if (plots.isEmpty()) return;
    const int n = plots.size();
    painter->save();
    for (int i = 0; i < n; ++i) {
        const int w = orientation == Qt::Horizontal ? size.width() / n : size.width();
        const int h = orientation == Qt::Horizontal ? size.height() : size.height() / n;
        plots[i]->toPainter(painter, w, h);
        painter->translate(orientation == Qt::Horizontal ? w : 0,
                           orientation == Qt::Horizontal ? 0 : h);
    }
    painter->restore();
}

void legendBelow(QCustomPlot* plot, int row, double pointSize) {
    plot->legend->setVisible(true);
    QFont font = plot->legend->font();
    font.setPointSizeF(pointSize);
    plot->legend->setFont(font);
    auto* legendRow = new QCPLayoutGrid;
    plot->plotLayout()->addElement(row, 0, legendRow);
    legendRow->addElement(0, 0, plot->legend);  // taken out of the axes' inset
    plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    plot->plotLayout()->setRowStretchFactor(row, 0.001);
}

void fitRanges(QCustomPlot* plot, double margin) {
    plot->rescaleAxes();
    for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
        QCPRange r = axis->range();
        if (axis->scaleType() == QCPAxis::stLogarithmic && r.lower > 0 && r.upper > 0) {
            const double factor = std::pow(std::max(r.upper / r.lower, 10.0), margin);
            axis->setRange(r.lower / factor, r.upper * factor);
        } else {
            const double span = r.size() > 0 ? r.size() : std::max(std::abs(r.upper), 1.0);
            axis->setRange(r.lower - span * margin, r.upper + span * margin);
        }
    }
}

}  // namespace relulens::ui
