// Colour gradients shared by the heatmap views (perceptually ordered, readable in print).
#pragma once
#include "qcustomplot.h"

namespace relulens::ui {

// A gradient from evenly listed colours; NaN (cells that do not exist, such as masked keys after
// the query) is light grey.
inline QCPColorGradient gradientFrom(std::initializer_list<QColor> colours) {
    QCPColorGradient g;
    g.clearColorStops();
    const double step = 1.0 / double(colours.size() - 1);
    double position = 0;
    for (const QColor& c : colours) {
        g.setColorStopAt(std::min(1.0, position), c);
        position += step;
    }
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    g.setNanHandling(QCPColorGradient::nhNanColor);
    g.setNanColor(QColor(236, 236, 240));
    return g;
}

// Viridis (dark purple → blue → green → yellow) as QCustomPlot colour stops.
inline QCPColorGradient viridisGradient() {
    return gradientFrom(
        {QColor(0x44, 0x01, 0x54), QColor(0x48, 0x28, 0x78), QColor(0x3b, 0x52, 0x8b),
         QColor(0x2c, 0x72, 0x8e), QColor(0x21, 0x91, 0x8c), QColor(0x28, 0xae, 0x80),
         QColor(0x5e, 0xc9, 0x62), QColor(0xad, 0xdc, 0x30), QColor(0xfd, 0xe7, 0x25)});
}

// Blue (negative) – white (zero) – red (positive), for differences.
inline QCPColorGradient divergingGradient() {
    return gradientFrom({QColor(0x21, 0x66, 0xac), QColor(0x92, 0xc5, 0xde),
                         QColor(0xf7, 0xf7, 0xf7), QColor(0xf4, 0xa5, 0x82),
                         QColor(0xb2, 0x18, 0x2b)});
}

}  // namespace relulens::ui
