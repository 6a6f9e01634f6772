// Query × key heatmap of one layer's head (or the mean of its heads): unsmoothed cells, an
// honest colour scale (linear or log), token labels when they fit, a hover tooltip, zoom and
// pan, and the selected query row outlined. Clicking a cell selects its query token.
// Level of detail: when the visible part of the map has more entries than the plot has pixels,
// each cell pools a block of entries (max or mean, named on the colour scale); zooming or
// panning rebuilds the visible tile at the new resolution, down to single entries.
#pragma once
#include <QTimer>

#include "core/attention_maps.h"
#include "core/capture.h"
#include "core/scene.h"
#include "ui/exportable_view.h"
#include "ui/map_jobs.h"
#include "ui/plot_helpers.h"

class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QCPItemRect;
class QCPTextElement;
class QComboBox;

namespace relulens::ui {

class AttentionMapView : public ExportableView {
    Q_OBJECT
public:
    explicit AttentionMapView(AppState* state, QWidget* parent = nullptr);

    QString viewName() const override { return QStringLiteral("attention"); }
    QString title() const override { return QStringLiteral("Attention map"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;

    void setLogScale(bool log);
    bool logScale() const { return log_; }
    void setPooling(core::Pooling pooling);
    core::Pooling pooling() const { return pooling_; }
    // Entries per shown cell along rows and keys (1 × 1: every entry is its own cell).
    QSize cellBlock() const { return block_; }
    // The rows and keys shown (unset: the whole map, as after a new text).
    std::optional<core::ZoomRegion> zoom() const;
    // Shows this region, or the whole map when unset. A region beyond the shown text waits for
    // the result it was made for (a scene opened before its text is computed).
    void setZoom(const std::optional<core::ZoomRegion>& region);
    // Tooltip text for a cell (what hovering shows); empty outside the map.
    QString tooltipAt(int query, int key) const;
    QCustomPlot* plot() const { return plot_; }
    // Cell under a widget-relative position of the plot, or (-1, -1).
    QPoint cellAt(const QPoint& plotPosition) const;

public Q_SLOTS:
    void refresh() override;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    // The visible region at the plot's resolution, and what it was built from.
    struct Tile {
        std::shared_ptr<const core::CaptureResult> result;
        int layer = 0, head = 0;
        int64_t q0 = 0, q1 = 0, k0 = 0, k1 = 0, outRows = 0, outKeys = 0;
        core::Pooling pooling = core::Pooling::Max;
        QString key;
        torch::Tensor values;  // (rows, keys) pooled weights, NaN where only masked entries
        HeatmapCells cells;    // the same, ready to show
        double maxValue = 0, minValue = 0, minPositive = 1e30;
    };
    Tile wantedTile() const;
    static Tile computeTile(Tile tile);          // on the map thread
    static QString requestId(const Tile& tile);  // what requested_ holds while it is built
    void applyTile(Tile tile);                   // on the GUI thread: draws it
    void applyScale();
    void updateSelection();
    void refreshTile();  // asks the map thread for the visible tile when it changed
    // For exports: the visible tile now, taken from the map thread when it is building this very
    // tile, else built here.
    void ensureCurrentTile();

    QCustomPlot* plot_;
    QCPColorMap* map_;
    QCPColorScale* scale_;
    QCPItemRect* row_;
    QCPTextElement* heading_;
    QComboBox* scaleMode_;
    QComboBox* poolingMode_;
    QTimer refine_;
    bool log_ = false;
    core::Pooling pooling_ = core::Pooling::Max;
    int size_ = 0;
    std::optional<core::ZoomRegion> pendingZoom_;
    QSize block_{1, 1};
    int64_t rowBegin_ = 0, rowEnd_ = 0, keyBegin_ = 0, keyEnd_ = 0;  // the shown region
    Tile shown_;                                                     // the tile drawn
    // The last tiles drawn, newest last, each without its result: a tile must not keep a result
    // alive that the window has let go (at 8,192 tokens one holds ~150 MB).
    struct RecentTile {
        std::weak_ptr<const core::CaptureResult> result;
        Tile tile;  // its result left empty
        bool matches(const Tile& wanted) const {
            return !result.expired() && result.lock() == wanted.result && tile.key == wanted.key;
        }
    };
    static constexpr size_t kRecentTiles = 4;
    std::vector<RecentTile> recentTiles_;
    QString requested_;  // the tile asked of the map thread, until it arrives
    MapChannel channel_;
};

}  // namespace relulens::ui
