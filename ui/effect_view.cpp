#include "ui/effect_view.h"

#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/override_menu.h"
#include "ui/plot_helpers.h"
#include "ui/token_text.h"

namespace relulens::ui {

EffectView::EffectView(AppState* state, QWidget* parent)
    : ExportableView(state, parent), plot_(new QCustomPlot(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(plot_);
    plot_->plotLayout()->insertRow(0);
    heading_ = new QCPTextElement(plot_, QString(), QFont(font().family(), 9, QFont::Bold));
    plot_->plotLayout()->addElement(0, 0, heading_);
    delta_ = new QCPBars(plot_->xAxis, plot_->yAxis);
    delta_->setName("Δ log p(actual next token)");
    delta_->setBrush(QColor(70, 110, 190, 170));
    delta_->setPen(Qt::NoPen);
    kl_ = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
    kl_->setName("KL(without ‖ with), right axis");
    kl_->setPen(QPen(QColor(220, 120, 30), 1.5));
    plot_->xAxis->setLabel("token (predicting the one after it)");
    plot_->yAxis->setLabel("Δ log p, nats (bars)");
    plot_->yAxis2->setVisible(true);
    plot_->yAxis2->setLabel("KL, nats (line)");
    legendBelow(plot_, 2);
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot_->axisRect()->setRangeZoom(Qt::Horizontal);
    plot_->axisRect()->setRangeDrag(Qt::Horizontal);
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
        auto result = state_->result();
        const int token = int(std::lround(plot_->xAxis->pixelToCoord(event->pos().x())));
        if (result && token >= 0 && token < int(result->tokens.size()))
            state_->setQueryToken(token);
    });
    connect(state_, &AppState::resultChanged, this, &EffectView::refresh);
}

QString EffectView::heading() const {
    return headingText(heading_);
}

void EffectView::refresh() {
    auto result = state_->result();
    if (!result) return;
    if (!result->effect || result->effect->kl.empty()) {
        delta_->data()->clear();
        kl_->data()->clear();
        setHeading(heading_,
                   "no overrides: right-click a head (head grid, sparsity, or the layer and "
                   "head boxes) to give it or its layer another activation, or to switch it off");
        plot_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const auto& e = *result->effect;
    QVector<double> x, delta, kl;
    size_t most = 0;
    for (size_t i = 0; i < e.kl.size(); ++i) {
        x << double(i);
        delta << e.deltaLogProb[i];
        kl << e.kl[i];
        if (e.kl[i] > e.kl[most]) most = i;
    }
    delta_->setData(x, delta, true);
    kl_->setData(x, kl, true);
    delta_->setWidth(0.8);
    plot_->xAxis->setRange(-0.6, double(e.kl.size()) - 0.4);
    const double reach =
        std::max(0.05, *std::max_element(delta.begin(), delta.end(), [](double a, double b) {
                     return std::abs(a) < std::abs(b);
                 }) * 1.0);
    plot_->yAxis->setRange(-std::abs(reach) * 1.1, std::abs(reach) * 1.1);
    plot_->yAxis2->setRange(0, std::max(0.01, e.kl[most] * 1.1));
    setHeading(heading_,
               QString("effect of the overrides (%1)\ntext loss %2 → %3 nats (%4); largest "
                       "change predicting “%5” after token %6: KL %7, Δ log p %8")
                   .arg(overridesText(result->run))
                   .arg(e.unchangedLoss, 0, 'f', 3)
                   .arg(e.loss, 0, 'f', 3)
                   .arg(e.loss - e.unchangedLoss, 0, 'f', 3)
                   .arg(tokenLabel(*result, int(most) + 1))
                   .arg(most)
                   .arg(e.kl[most], 0, 'f', 3)
                   .arg(e.deltaLogProb[most], 0, 'f', 3));
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString EffectView::csv() const {
    auto result = state_->result();
    if (!result || !result->effect) return QString();
    const auto& e = *result->effect;
    QString out = QString("# text loss without the overrides %1, with them %2\n")
                      .arg(e.unchangedLoss, 0, 'g', 8)
                      .arg(e.loss, 0, 'g', 8);
    out += "token,next_token,delta_log_prob,kl\n";
    for (size_t i = 0; i < e.kl.size(); ++i) {
        out += QString("%1,%2,%3,%4\n")
                   .arg(i)
                   .arg(result->tokens[i + 1].id)
                   .arg(e.deltaLogProb[i], 0, 'g', 8)
                   .arg(e.kl[i], 0, 'g', 8);
    }
    return out;
}

void EffectView::renderFigure(QCPPainter* painter, const QSize& size) {
    plot_->toPainter(painter, size.width(), size.height());
}

}  // namespace relulens::ui
