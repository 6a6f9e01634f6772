// The logit lens: the residual stream after each layer, through the final norm and the output
// layer, read as next-token predictions. Above, a layers × tokens heatmap of the probability of
// the actual next token (its last row is the model's own prediction); below, each layer's top
// next tokens after the selected token.
#pragma once
#include "ui/exportable_view.h"

class QCustomPlot;
class QCPColorMap;
class QCPTextElement;

namespace relulens::ui {

class LensView : public ExportableView {
    Q_OBJECT
public:
    explicit LensView(AppState* state, QWidget* parent = nullptr);

    QString viewName() const override { return QStringLiteral("lens"); }
    QString title() const override { return QStringLiteral("Logit lens"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;
    // The colour drawn on screen at the centre of cell (layer, token).
    QColor drawnColour(int layer, int token) const;
    // The lines under the heatmap, one per layer.
    QStringList topLines() const { return topLines_; }

public Q_SLOTS:
    void refresh() override;

private:
    void refreshTop();
    int shownToken() const;

    QCustomPlot* heat_;
    QCustomPlot* top_;
    QCPColorMap* map_;
    QCPTextElement* heading_;
    QCPTextElement* topHeading_;
    QStringList topLines_;
};

}  // namespace relulens::ui
