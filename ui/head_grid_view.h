// Every layer × head as a small attention map (as BertViz's model view), each scaled to its own
// maximum; the selected head is outlined and clicking one selects it for the attention map.
// Each thumbnail is the head's map max-pooled to 128 × 128 cells, built when the grid is shown.
#pragma once
#include <QImage>
#include <QVector>

#include "core/capture.h"
#include "ui/exportable_view.h"
#include "ui/map_jobs.h"

namespace relulens::ui {

class HeadGridView : public ExportableView {
    Q_OBJECT
public:
    explicit HeadGridView(AppState* state, QWidget* parent = nullptr);
    QString viewName() const override { return QStringLiteral("heads"); }
    QString title() const override { return QStringLiteral("Head grid"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;
    // Layer and head of the thumbnail under a point of the widget, or (-1, -1).
    QPoint headAt(const QPoint& position) const;
    // The tooltip at a point: the layer and head (with its kv head under grouped-query
    // attention), or empty between thumbnails.
    QString tooltipAt(const QPoint& position) const;

public Q_SLOTS:
    void refresh() override;

protected:
    bool event(QEvent* event) override;  // tooltips: layer and head (with its kv head)
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;

private:
    QRect cellRect(const QSize& size, int layer, int head) const;
    void paintGrid(QPainter* painter, const QSize& size);
    static QVector<QImage> thumbnailsOf(const core::CaptureResult& result);  // layer-major
    void requestThumbnails();  // from the map thread, when the result changed
    void buildThumbnails();    // here and now (exports)
    void setThumbnails(std::shared_ptr<const core::CaptureResult> result, QVector<QImage> images);

    QVector<QImage> thumbnails_;  // layer-major
    int layers_ = 0, heads_ = 0;
    std::shared_ptr<const core::CaptureResult> builtFrom_;      // what thumbnails_ show
    std::shared_ptr<const core::CaptureResult> requestedFrom_;  // asked of the map thread
    MapChannel channel_;
};

}  // namespace relulens::ui
