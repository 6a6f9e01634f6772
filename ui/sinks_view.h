// Attention sinks and massive activations (PAPERS.md): a layer × head heatmap of the first
// token's share of each row, sink heads outlined, and below it the per-layer profile of the
// residual stream's largest value against its median, with the stream's kurtosis.
#pragma once
#include "ui/exportable_view.h"

class QCustomPlot;
class QCPColorMap;
class QCPTextElement;
class QCPBars;
class QCPGraph;

namespace relulens::ui {

class SinksView : public ExportableView {
    Q_OBJECT
public:
    explicit SinksView(AppState* state, QWidget* parent = nullptr);

    QString viewName() const override { return QStringLiteral("sinks"); }
    QString title() const override { return QStringLiteral("Sinks"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;
    // What the grid and the profile show (tests compare them with hand-built maps).
    double cellValue(int layer, int head) const;
    bool cellMarkedSink(int layer, int head) const;
    double profileValue(int layer) const;

public Q_SLOTS:
    void refresh() override;

private:
    QCustomPlot* grid_;
    QCustomPlot* profile_;
    QCPColorMap* gridMap_;
    QCPTextElement* gridHeading_;
    QCPTextElement* profileHeading_;
    QCPBars* ratioBars_;
    QCPGraph* kurtosis_;
    QVector<QVector<bool>> marked_;  // [layer][head] outlined as a sink head
};

}  // namespace relulens::ui
