// Query × key heatmap of one layer's head (or the mean of its heads): unsmoothed cells, an
// honest colour scale (linear or log), token labels when they fit, a hover tooltip, zoom and
// pan, and the selected query row outlined. Clicking a cell selects its query token.
#pragma once
#include "ui/exportable_view.h"

class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QCPItemRect;
class QCPTextElement;
class QComboBox;

namespace relulens::ui {

class AttentionMapView : public ExportableView {
    Q_OBJECT
public:
    explicit AttentionMapView(AppState* state, QWidget* parent = nullptr);

    QString viewName() const override { return QStringLiteral("attention"); }
    QString title() const override { return QStringLiteral("Attention map"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;

    void setLogScale(bool log);
    bool logScale() const { return log_; }
    // Tooltip text for a cell (what hovering shows); empty outside the map.
    QString tooltipAt(int query, int key) const;
    QCustomPlot* plot() const { return plot_; }
    // Cell under a widget-relative position of the plot, or (-1, -1).
    QPoint cellAt(const QPoint& plotPosition) const;

public Q_SLOTS:
    void refresh() override;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void updateSelection();

    QCustomPlot* plot_;
    QCPColorMap* map_;
    QCPColorScale* scale_;
    QCPItemRect* row_;
    QCPTextElement* heading_;
    QComboBox* scaleMode_;
    bool log_ = false;
    int size_ = 0;
};

}  // namespace relulens::ui
