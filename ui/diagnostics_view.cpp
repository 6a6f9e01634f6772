#include "ui/diagnostics_view.h"

#include <QHBoxLayout>

#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/capture_access.h"
#include "ui/plot_helpers.h"

namespace relulens::ui {

namespace {

const QColor kCurrent(200, 60, 40);
const QColor kOther(50, 100, 180);

struct Curves {
    QVector<double> x, current, other;
};

// Output variance by n bucket of the layer (mean over heads), keyed by the bucket's top n.
Curves varianceByN(const core::CaptureResult& a, const core::CaptureResult& b, int layer) {
    Curves c;
    const auto& va = a.layers[size_t(layer)].attentionDiagnostics.outputVarianceByN;
    const auto& vb = b.layers[size_t(layer)].attentionDiagnostics.outputVarianceByN;
    for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
        c.x << double(va[i].nHigh);
        c.current << va[i].variance;
        c.other << vb[i].variance;
    }
    return c;
}

QVector<double> profileOf(const core::CaptureResult& r, int layer, int head) {
    const auto& heads = r.layers[size_t(layer)].attentionDiagnostics.heads;
    QVector<double> out;
    if (heads.empty()) return out;
    const size_t n = heads[0].distanceProfile.size();
    for (size_t d = 0; d < n; ++d) {
        double sum = 0;
        int count = 0;
        for (size_t h = 0; h < heads.size(); ++h) {
            if (head >= 0 && int(h) != head) continue;
            sum += heads[h].distanceProfile[d];
            ++count;
        }
        out << sum / std::max(1, count);
    }
    return out;
}

double meanEntropy(const core::CaptureResult& r, int layer) {
    const auto& heads = r.layers[size_t(layer)].attentionDiagnostics.heads;
    double sum = 0;
    for (const auto& h : heads) sum += h.entropy;
    return heads.empty() ? 0 : sum / double(heads.size());
}

void setCurves(QCustomPlot* plot, const QVector<double>& x, const QVector<double>& a,
               const QVector<double>& b, const QString& nameA, const QString& nameB) {
    plot->clearGraphs();
    auto* ga = plot->addGraph();
    ga->setData(x, a);
    ga->setName(nameA);
    ga->setPen(QPen(kCurrent, 2));
    ga->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    auto* gb = plot->addGraph();
    gb->setData(x, b);
    gb->setName(nameB);
    gb->setPen(QPen(kOther, 2, Qt::DashLine));
    gb->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssSquare, 5));
    fitRanges(plot);
}

}  // namespace

DiagnosticsView::DiagnosticsView(AppState* state, QWidget* parent) : ExportableView(state, parent) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    const char* axes[3][2] = {{"rows with n_i up to", "attention output variance"},
                              {"query–key distance", "mean weight"},
                              {"layer", "mean row entropy (nats)"}};
    for (int i = 0; i < 3; ++i) {
        plots_[i] = new QCustomPlot(this);
        plots_[i]->plotLayout()->insertRow(0);
        headings_[i] = new QCPTextElement(plots_[i], "", QFont(font().family(), 9, QFont::Bold));
        plots_[i]->plotLayout()->addElement(0, 0, headings_[i]);
        plots_[i]->xAxis->setLabel(axes[i][0]);
        plots_[i]->yAxis->setLabel(axes[i][1]);
        plots_[i]->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
        legendBelow(plots_[i], 2);
        layout->addWidget(plots_[i]);
    }
    auto logTicker = QSharedPointer<QCPAxisTickerLog>::create();
    for (int i : {0, 1}) {
        plots_[i]->xAxis->setScaleType(QCPAxis::stLogarithmic);
        plots_[i]->xAxis->setTicker(logTicker);
    }
    plots_[0]->yAxis->setScaleType(QCPAxis::stLogarithmic);
    plots_[0]->yAxis->setTicker(logTicker);
    connect(state_, &AppState::resultChanged, this, &DiagnosticsView::refresh);
    connect(state_, &AppState::comparisonChanged, this, &DiagnosticsView::refresh);
    connect(state_, &AppState::layerHeadChanged, this, &DiagnosticsView::refresh);
}

void DiagnosticsView::refresh() {
    auto a = state_->result();
    auto b = state_->comparison();
    if (!a || !b || a->layers.empty() || b->layers.empty()) return;
    const int layer = state_->layer();
    const QString nameA = QString::fromStdString(a->run.attention.label()) + " (current)";
    const QString nameB = QString::fromStdString(b->run.attention.label());
    const auto v = varianceByN(*a, *b, layer);
    setCurves(plots_[0], v.x, v.current, v.other, nameA, nameB);
    setHeading(headings_[0], QString("Output variance against n, layer %1").arg(layer));

    const auto pa = profileOf(*a, layer, state_->head());
    const auto pb = profileOf(*b, layer, state_->head());
    QVector<double> distance;
    for (int d = 0; d < pa.size(); ++d) distance << d + 1;  // shifted by one for the log axis
    setCurves(plots_[1], distance, pa, pb, nameA, nameB);
    plots_[1]->xAxis->setLabel("query–key distance + 1");
    setHeading(
        headings_[1],
        QString("Distance profile, layer %1 · %2").arg(layer).arg(headLabel(state_->head())));

    QVector<double> layers, ea, eb;
    for (int l = 0; l < int(a->layers.size()); ++l) {
        layers << l;
        ea << meanEntropy(*a, l);
        eb << meanEntropy(*b, l);
    }
    setCurves(plots_[2], layers, ea, eb, nameA, nameB);
    plots_[2]->xAxis->setRange(-0.3, layers.size() - 0.7);
    auto integers = QSharedPointer<QCPAxisTickerFixed>::create();
    integers->setTickStep(1);
    plots_[2]->xAxis->setTicker(integers);
    setHeading(headings_[2], "Entropy per layer (mean over heads)");
    for (auto* plot : plots_) plot->replot(QCustomPlot::rpQueuedReplot);
}

QString DiagnosticsView::csv() const {
    auto a = state_->result();
    auto b = state_->comparison();
    if (!a || !b) return QString();
    const int layer = state_->layer();
    QString out = QString("series,x,%1,%2\n")
                      .arg(QString::fromStdString(a->run.attention.label()),
                           QString::fromStdString(b->run.attention.label()));
    const auto v = varianceByN(*a, *b, layer);
    for (int i = 0; i < v.x.size(); ++i) {
        out += QString("output_variance_n_up_to,%1,%2,%3\n")
                   .arg(v.x[i])
                   .arg(v.current[i], 0, 'g', 8)
                   .arg(v.other[i], 0, 'g', 8);
    }
    const auto pa = profileOf(*a, layer, state_->head()), pb = profileOf(*b, layer, state_->head());
    for (int d = 0; d < pa.size(); ++d) {
        out += QString("distance_profile,%1,%2,%3\n")
                   .arg(d)
                   .arg(pa[d], 0, 'g', 8)
                   .arg(pb[d], 0, 'g', 8);
    }
    for (int l = 0; l < int(a->layers.size()); ++l) {
        out += QString("entropy_layer,%1,%2,%3\n")
                   .arg(l)
                   .arg(meanEntropy(*a, l), 0, 'g', 8)
                   .arg(meanEntropy(*b, l), 0, 'g', 8);
    }
    return out;
}

void DiagnosticsView::renderFigure(QCPPainter* painter, const QSize& size) {
    paintPlots(painter, size, {plots_[0], plots_[1], plots_[2]}, Qt::Horizontal);
}

}  // namespace relulens::ui
