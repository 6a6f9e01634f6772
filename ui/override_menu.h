// The menu a right-click on a head opens (head grid, sparsity heatmap, the layer and head
// selectors): run that head, or every head of its layer, with another attention variant; switch
// the head off (output 0) or make it uniform (1/n_i to every key it sees); clear every override.
// Overrides stack on the attention chosen for the whole model and recompute like any toggle.
#pragma once
#include <QString>

#include "core/variants.h"

class QMenu;
class QWidget;

namespace relulens::ui {

class AppState;

// How menus and lists name an attention variant ("ReLU ÷ n", "1.5-entmax", ...).
QString attentionLabel(core::AttentionKind kind);

// A new menu (deleted when closed) for head `head` of `layer` (-1: the layer only). Its actions
// carry object names for tests: "head:VARIANT", "layer:VARIANT", "zero", "uniform", "clear".
QMenu* overrideMenu(AppState* state, int layer, int head, QWidget* parent);

// "none", or the overrides in order: "layer 2: ReLU ÷ n · layer 1 head 3: off".
QString overridesText(const core::RunSpec& run);

}  // namespace relulens::ui
