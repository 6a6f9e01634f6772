// Small helpers shared by the QCustomPlot views: a titled heatmap with a colour scale, and
// filling a heatmap from a (rows, cols) tensor.
#pragma once
#include <QString>
#include <memory>

#include "core/torch_include.h"
#include "qcustomplot.h"

namespace relulens::ui {

struct Heatmap {
    QCPColorMap* map = nullptr;
    QCPColorScale* scale = nullptr;
    QCPTextElement* heading = nullptr;
};

// Adds a title row, a viridis colour map on the main axes and a colour scale at its right.
Heatmap addHeatmap(QCustomPlot* plot, int titlePointSize = 9);

// Cell (x = column, y = row) from a (rows, cols) float tensor; NaN where `masked` says so.
void fillHeatmap(QCPColorMap* map, const torch::Tensor& values, bool causalMask = false);

// A pooled map of the region rows [rowBegin, rowEnd) × keys [keyBegin, keyEnd) as heatmap
// cells placed over the tokens they summarise (NaN cells stay blank). Built on any thread (a map
// thread builds them, the GUI thread only shows them: filling a plot-sized map cell by cell took
// 10-40 ms of it).
using HeatmapCells = std::shared_ptr<const QCPColorMapData>;
HeatmapCells regionHeatmapCells(const torch::Tensor& values, int64_t rowBegin, int64_t rowEnd,
                                int64_t keyBegin, int64_t keyEnd);
// Shows cells built by regionHeatmapCells: one copy into the map's own data, no per-cell work.
void showHeatmapCells(QCPColorMap* map, const HeatmapCells& cells);

// Moves the legend into a row under the axes (in columns), where it never covers the data.
// `row` is the plot layout's first free row.
void legendBelow(QCustomPlot* plot, int row, double pointSize = 8);

// Both axes fitted to the visible data with a margin (a fraction of each range, in log space on
// a log axis), so that no point sits on the frame or outside it.
void fitRanges(QCustomPlot* plot, double margin = 0.06);

// Draws several plots side by side (horizontal) or stacked into one figure.
void paintPlots(QCPPainter* painter, const QSize& size, const QList<QCustomPlot*>& plots,
                Qt::Orientation orientation);

}  // namespace relulens::ui
