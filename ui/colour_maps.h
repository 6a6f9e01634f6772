// Colour gradients shared by the heatmap views (perceptually ordered, readable in print).
#pragma once
#include "qcustomplot.h"

namespace relulens::ui {

// Viridis (dark purple → blue → green → yellow) as QCustomPlot colour stops.
inline QCPColorGradient viridisGradient() {
    QCPColorGradient g;
    g.clearColorStops();
    g.setColorStopAt(0.0, QColor(0x44, 0x01, 0x54));
    g.setColorStopAt(0.125, QColor(0x48, 0x28, 0x78));
    g.setColorStopAt(0.25, QColor(0x3b, 0x52, 0x8b));
    g.setColorStopAt(0.375, QColor(0x2c, 0x72, 0x8e));
    g.setColorStopAt(0.5, QColor(0x21, 0x91, 0x8c));
    g.setColorStopAt(0.625, QColor(0x28, 0xae, 0x80));
    g.setColorStopAt(0.75, QColor(0x5e, 0xc9, 0x62));
    g.setColorStopAt(0.875, QColor(0xad, 0xdc, 0x30));
    g.setColorStopAt(1.0, QColor(0xfd, 0xe7, 0x25));
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    // NaN marks cells that do not exist (masked keys after the query): light grey.
    g.setNanHandling(QCPColorGradient::nhNanColor);
    g.setNanColor(QColor(236, 236, 240));
    return g;
}

// Blue (negative) – white (zero) – red (positive), for differences.
inline QCPColorGradient divergingGradient() {
    QCPColorGradient g;
    g.clearColorStops();
    g.setColorStopAt(0.0, QColor(0x21, 0x66, 0xac));
    g.setColorStopAt(0.25, QColor(0x92, 0xc5, 0xde));
    g.setColorStopAt(0.5, QColor(0xf7, 0xf7, 0xf7));
    g.setColorStopAt(0.75, QColor(0xf4, 0xa5, 0x82));
    g.setColorStopAt(1.0, QColor(0xb2, 0x18, 0x2b));
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    g.setNanHandling(QCPColorGradient::nhNanColor);
    g.setNanColor(QColor(236, 236, 240));
    return g;
}

}  // namespace relulens::ui
