// The formula and a plain-words explanation of the current attention and FFN variants, for
// teaching (PAPERS.md in ReluLens's own words). Follows the AppState.
#pragma once
#include <QTextBrowser>

#include "core/variants.h"

namespace relulens::ui {

class AppState;

class ExplanationPanel : public QTextBrowser {
    Q_OBJECT
public:
    explicit ExplanationPanel(AppState* state, QWidget* parent = nullptr);
    static QString explain(const core::RunSpec& run, const core::RunSpec& trained,
                           bool sameWeights);

public Q_SLOTS:
    void refresh();

private:
    AppState* state_;
};

}  // namespace relulens::ui
