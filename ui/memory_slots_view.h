// The FFN as a key-value memory for the selected layer: tokens × slots heatmap of activations
// m_ti (slots ordered by index, total activation or selectivity), the top slots of the selected
// token, and for the selected slot the tokens it fires on here and the vocabulary its value
// vector promotes (v_i·Eᵀ).
#pragma once
#include <QVector>

#include "core/capture.h"
#include "ui/exportable_view.h"
#include "ui/map_jobs.h"
#include "ui/plot_helpers.h"

class QComboBox;
class QLabel;

namespace relulens::ui {

class MemorySlotsView : public ExportableView {
    Q_OBJECT
public:
    enum class Order { Index, Total, Selective };
    explicit MemorySlotsView(AppState* state, QWidget* parent = nullptr);
    QString viewName() const override { return QStringLiteral("memory"); }
    QString title() const override { return QStringLiteral("Memory slots"); }
    QString csv() const override;
    void renderFigure(QCPPainter* painter, const QSize& size) override;
    void setOrder(Order order);
    // Slot index shown in column `column` under the current order.
    int slotAtColumn(int column) const { return order_.value(column, -1); }
    // The text that describes the selected slot (tokens it fires on, promoted vocabulary).
    QString slotDescription() const;

public Q_SLOTS:
    // Asks the map thread for the heatmap (slot order and token rows pooled); draws it when it
    // comes. The GUI thread never touches the (tokens × slots) activations.
    void refresh() override;
    // The token's top slots and the selected slot's details (the heatmap stays).
    void refreshSelection();

private:
    // What the heatmap shows: the slots in order and the token rows, max-pooled to at most
    // kMaxHeatmapRows rows.
    struct Figure {
        std::shared_ptr<const core::CaptureResult> result;
        int layer = -1;
        Order rule = Order::Total;
        QVector<int> order;
        torch::Tensor shown;  // (rows, slots), the columns in `order`
        HeatmapCells cells;   // the same, ready to show
        int block = 1;        // tokens per row
        bool same(const Figure& o) const {
            return result == o.result && layer == o.layer && rule == o.rule;
        }
    };
    Figure wantedFigure() const;
    static Figure computeFigure(Figure figure);  // on the map thread
    void applyFigure(Figure figure);             // on the GUI thread: draws it
    void ensureCurrentFigure();                  // an export draws what is asked, now

    QCustomPlot* heat_;
    QCustomPlot* bars_;
    Heatmap map_;
    QCPBars* topSlots_;
    QCPTextElement* barsHeading_;
    QComboBox* orderBox_;
    QLabel* details_;
    Order orderRule_ = Order::Total;
    QVector<int> order_;
    int topSlotOfToken_ = -1;  // shown when no slot has been picked
    MapChannel channel_;
    Figure shown_;
};

}  // namespace relulens::ui
