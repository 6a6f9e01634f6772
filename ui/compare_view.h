// The selected layer and head under two activations side by side — the current variant and the
// comparison (softmax, or ReLU ÷ n when softmax is current) — plus their difference.
#pragma once
#include "core/capture.h"
#include "ui/exportable_view.h"
#include "ui/map_jobs.h"
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
    struct Panels {
        std::shared_ptr<const core::CaptureResult> result, other;
        int layer = 0, head = 0;
        int64_t cells = 0;
        torch::Tensor a, b;         // (cells, cells) mean-pooled maps of result and other
        HeatmapCells shown[3];      // a, b and a − b, ready to show
        double differenceSpan = 0;  // the largest |a − b|
    };
    Panels wantedPanels() const;
    static Panels computePanels(Panels panels);  // on the map thread
    void requestPanels();
    void draw(const Panels& panels);
    bool stale_ = true;  // refreshed while hidden: drawn when shown or exported
    MapChannel channel_;
    QCustomPlot* plots_[3];
    Heatmap maps_[3];
};

}  // namespace relulens::ui
