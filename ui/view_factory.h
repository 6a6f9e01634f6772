// The views by name, so the window, `relulens render` and the tests build them the same way.
#pragma once
#include <QStringList>

class QWidget;

namespace relulens::ui {

class AppState;
class ExportableView;

QStringList viewNames();  // "attention", "heads", "compare", "sparsity", "memory", ...
ExportableView* createView(const QString& name, AppState* state, QWidget* parent = nullptr);

}  // namespace relulens::ui
