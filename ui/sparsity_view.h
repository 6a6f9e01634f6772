// Layer × head heatmap of a diagnostic (sparsity, entropy, row mass or top-1 share) with the
// numbers in the cells, and below it tokens × layers for the selected head. The rule behind
// sparsity (exact zeros, or below τ = scale / n_i for softmax) is stated on the view.
#pragma once
#include "ui/exportable_view.h"

class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QCPTextElement;
class QComboBox;

namespace relulens::ui {

class SparsityView : public ExportableView {
    Q_OBJECT
public:
    enum class Metric { Sparsity, Entropy, RowMass, TopRatio };
    explicit SparsityView(AppState* state, QWidget* parent = nullptr);

    QString viewName() const override { return QStringLiteral("sparsity"); }
    QString title() const override { return QStringLiteral("Sparsity"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;
    void setMetric(Metric metric);
    // The value the layer × head grid shows for a cell (tests compare it with the capture).
    double cellValue(int layer, int head) const;

public Q_SLOTS:
    void refresh() override;

private:
    QCustomPlot* grid_;
    QCustomPlot* tokens_;
    QCPColorMap* gridMap_;
    QCPColorMap* tokenMap_;
    QCPTextElement* gridHeading_;
    QCPTextElement* tokenHeading_;
    QComboBox* metricBox_;
    Metric metric_ = Metric::Sparsity;
};

}  // namespace relulens::ui
