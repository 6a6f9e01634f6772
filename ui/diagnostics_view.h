// PAPERS.md's diagnostics as curves, the current variant against the comparison (softmax, or
// ReLU ÷ n when softmax is current): attention output variance against n, mean weight against
// query–key distance, and mean entropy per layer.
#pragma once
#include "ui/exportable_view.h"

class QCustomPlot;
class QCPTextElement;

namespace relulens::ui {

class DiagnosticsView : public ExportableView {
    Q_OBJECT
public:
    explicit DiagnosticsView(AppState* state, QWidget* parent = nullptr);
    QString viewName() const override { return QStringLiteral("diagnostics"); }
    QString title() const override { return QStringLiteral("Diagnostics"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;

public Q_SLOTS:
    void refresh() override;

private:
    QCustomPlot* plots_[3];
    QCPTextElement* headings_[3];
};

}  // namespace relulens::ui
