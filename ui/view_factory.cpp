#include "ui/view_factory.h"

#include "ui/attention_map_view.h"
#include "ui/predictions_view.h"
#include "ui/sparsity_view.h"

namespace relulens::ui {

QStringList viewNames() { return {"attention", "sparsity", "predictions"}; }

ExportableView* createView(const QString& name, AppState* state, QWidget* parent) {
    if (name == "attention") return new AttentionMapView(state, parent);
    if (name == "sparsity") return new SparsityView(state, parent);
    if (name == "predictions") return new PredictionsView(state, parent);
    return nullptr;
}

}  // namespace relulens::ui
