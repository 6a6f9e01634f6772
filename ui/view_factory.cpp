#include "ui/view_factory.h"

#include "ui/attention_map_view.h"
#include "ui/compare_view.h"
#include "ui/diagnostics_view.h"
#include "ui/effect_view.h"
#include "ui/head_grid_view.h"
#include "ui/lens_view.h"
#include "ui/memory_slots_view.h"
#include "ui/predictions_view.h"
#include "ui/sinks_view.h"
#include "ui/sparsity_view.h"

namespace relulens::ui {

QStringList viewNames() {
    return {"attention",   "heads",       "compare", "sparsity", "memory",
            "predictions", "diagnostics", "sinks",   "effect",   "lens"};
}

ExportableView* createView(const QString& name, AppState* state, QWidget* parent) {
    if (name == "attention") return new AttentionMapView(state, parent);
    if (name == "sparsity") return new SparsityView(state, parent);
    if (name == "predictions") return new PredictionsView(state, parent);
    if (name == "heads") return new HeadGridView(state, parent);
    if (name == "compare") return new CompareView(state, parent);
    if (name == "memory") return new MemorySlotsView(state, parent);
    if (name == "diagnostics") return new DiagnosticsView(state, parent);
    if (name == "sinks") return new SinksView(state, parent);
    if (name == "effect") return new EffectView(state, parent);
    if (name == "lens") return new LensView(state, parent);
    return nullptr;
}

}  // namespace relulens::ui
