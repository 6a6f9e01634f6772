// The FFN as a key-value memory for the selected layer: tokens × slots heatmap of activations
// m_ti (slots ordered by index, total activation or selectivity), the top slots of the selected
// token, and for the selected slot the tokens it fires on here and the vocabulary its value
// vector promotes (v_i·Eᵀ).
#pragma once
#include <QVector>

#include "ui/exportable_view.h"
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
    void refresh() override;
    // The token's top slots and the selected slot's details (the heatmap stays).
    void refreshSelection();

private:
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
};

}  // namespace relulens::ui
