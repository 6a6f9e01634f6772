// Layer × head heatmap of a diagnostic (sparsity, entropy, row mass or top-1 share) with the
// numbers in the cells, and below it tokens × layers for the selected head. The rule behind
// sparsity (exact zeros, or below τ = scale / n_i for softmax) is stated on the view.
#pragma once
#include <vector>

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
    // The value the tokens × layers map shows at query token `token` of `layer`.
    double tokenCellValue(int layer, int token) const;
    QCustomPlot* tokensPlot() const { return tokens_; }

public Q_SLOTS:
    void refresh() override;

private:
    // Fills the tokens × layers map from tokenRows_ over the visible tokens with at most
    // max(1,024, plot width) cells, each the mean of a block of tokens when more are in view
    // (10,744 single-token columns took 27 ms to redraw on the GUI thread); zoomed in, one
    // token per cell.
    void fillTokens();

    std::vector<std::vector<float>> tokenRows_;  // [layer][token] of the selected head
    QString tokenHeadingText_;
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
