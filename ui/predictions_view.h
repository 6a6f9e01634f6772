// Next-token top-k at the selected position (the last token when none is selected), as bars
// with probabilities; with overrides, the unchanged model's top-k below them.
#pragma once
#include "ui/exportable_view.h"

class QCustomPlot;
class QCPBars;
class QCPTextElement;

namespace relulens::ui {

class PredictionsView : public ExportableView {
    Q_OBJECT
public:
    explicit PredictionsView(AppState* state, QWidget* parent = nullptr);
    QString viewName() const override { return QStringLiteral("predictions"); }
    QString title() const override { return QStringLiteral("Predictions"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;
    int position() const;

public Q_SLOTS:
    void refresh() override;

private:
    QCustomPlot* plot_;
    QCPBars* bars_;
    QCPBars* unchangedBars_;
    QCPTextElement* heading_;
};

}  // namespace relulens::ui
