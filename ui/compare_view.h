// The selected layer and head under two activations side by side — the current variant and the
// comparison (softmax, or ReLU ÷ n when softmax is current) — plus their difference.
#pragma once
#include "ui/exportable_view.h"
#include "ui/plot_helpers.h"

namespace relulens::ui {

class CompareView : public ExportableView {
    Q_OBJECT
public:
    explicit CompareView(AppState* state, QWidget* parent = nullptr);
    QString viewName() const override { return QStringLiteral("compare"); }
    QString title() const override { return QStringLiteral("Compare"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;

public Q_SLOTS:
    void refresh() override;

protected:
    void showEvent(QShowEvent* event) override;

private:
    void redraw();
    bool stale_ = true;  // refreshed while hidden: redraw when shown or exported
    QCustomPlot* plots_[3];
    Heatmap maps_[3];
};

}  // namespace relulens::ui
