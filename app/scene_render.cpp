#include "app/scene_render.h"

#include <QApplication>
#include <algorithm>
#include <cstdio>
#include <memory>

#include "app/commands.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/model_catalog.h"
#include "ui/scene_state.h"
#include "ui/view_factory.h"

namespace relulens::app {

core::Result<QString> renderScene(const core::Scene& scene, const QStringList& views,
                                  const std::function<QString(const QString&)>& pathFor,
                                  const Frame& frame, bool strict) {
    ui::AppState state;
    state.setCatalog(ui::ModelCatalog::scanDefault());
    QString problem;
    if (ui::sceneModelFolder(scene, state, &problem).isEmpty())
        return core::Error{problem.toStdString()};
    const QStringList notes = ui::applySceneInputs(scene, state);
    for (const auto& note : notes) std::fprintf(stderr, "relulens: note: %s\n", qPrintable(note));
    state.setLensWanted(views.contains("lens"));
    ui::InferenceRequest request{1, state.effectiveFolder(), state.text().toStdString(),
                                 ui::InferenceController::captureRequestFor(state),
                                 ui::InferenceController::comparisonRequestFor(state)};
    const bool mapsOnly = std::all_of(views.begin(), views.end(), [](const QString& v) {
        return v == "attention" || v == "heads";
    });
    if (mapsOnly) {
        // these views draw maps only: no diagnostics, slot activations or comparison
        request.capture = core::mapsOnlyRequest(state.run());
        request.comparison.reset();
    }
    auto response = ui::InferenceController::computeNow(request, terminalLoadOptions("auto"));
    if (!response.result) return core::Error{response.error.toStdString()};
    if (!response.error.isEmpty()) {  // the result is drawn; what is missing from it is said
        std::fprintf(stderr, "relulens: note: %s\n", qPrintable(response.error));
    }
    state.setResult(response.result, response.comparison, response.vocabulary);
    const int64_t tokens = int64_t(response.result->tokens.size());
    if (scene.query >= tokens) {
        const std::string message = "the selected token " + std::to_string(scene.query) +
                                    " is past the text's last token (" +
                                    std::to_string(tokens - 1) + ")";
        if (strict) return core::Error{"--query: " + message};
        std::fprintf(stderr, "relulens: note: %s; the last token is selected\n", message.c_str());
    }
    ui::applySceneSelection(scene, state);
    for (const QString& name : views) {
        std::unique_ptr<ui::ExportableView> view(ui::createView(name, &state));
        view->resize(frame.width, frame.height);
        view->setAttribute(Qt::WA_DontShowOnScreen);
        view->show();
        QApplication::processEvents();
        if (auto* map = qobject_cast<ui::AttentionMapView*>(view.get()))
            ui::applySceneMap(scene, *map);
        view->refresh();
        QString error;
        if (!view->exportTo(pathFor(name), frame.scale, &error))
            return core::Error{error.toStdString()};
    }
    return state.provenance();
}

void startOffscreen() {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
}

}  // namespace relulens::app
