// What the per-layer and per-head overrides and ablations change, token by token: the change in
// log-probability of each actual next token (bars) and the KL divergence of the next-token
// distribution (line), against the same run without them, with the text's loss both ways.
#pragma once
#include "ui/exportable_view.h"

class QCustomPlot;
class QCPBars;
class QCPGraph;
class QCPTextElement;

namespace relulens::ui {

class EffectView : public ExportableView {
    Q_OBJECT
public:
    explicit EffectView(AppState* state, QWidget* parent = nullptr);

    QString viewName() const override { return QStringLiteral("effect"); }
    QString title() const override { return QStringLiteral("Effect"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;
    QString heading() const;

public Q_SLOTS:
    void refresh() override;

private:
    QCustomPlot* plot_;
    QCPTextElement* heading_;
    QCPBars* delta_;
    QCPGraph* kl_;
};

}  // namespace relulens::ui
