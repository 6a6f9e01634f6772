// relulens render: any view rendered headless with the same widgets as the window.
#include <QApplication>
#include <QFileInfo>
#include <cstdio>
#include <memory>

#include "app/commands.h"
#include "app/gui.h"
#include "core/device.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/sparsity_view.h"
#include "ui/view_factory.h"

namespace relulens::app {

int renderCommand(int argc, char** argv, const std::vector<std::string>& argvRest) {
    auto args = Arguments::parse(argvRest, {{"model"}, {"text"}, {"file"}, {"view"}, {"layer"},
                                            {"head"}, {"query"}, {"attention"}, {"h"}, {"a"}, {"sigmoid-bias"}, {"ssmax-sigma"},
                                            {"ffn"}, {"override", true, true}, {"ablate", true, true},
                                            {"tau"}, {"width"}, {"height"}, {"scale"},
                                            {"out"}, {"log", false}, {"force", false}});
    if (!args) return fail(args.error());
    if (!args->has("model") || !args->has("view") || !args->has("out")) {
        return fail("render needs --model DIR, --view NAME and --out FILE");
    }
    auto text = textFromArguments(*args);
    if (!text) return fail(text.error());
    const QString viewName = QString::fromStdString(args->value("view"));
    if (!ui::viewNames().contains(viewName)) {
        return fail("unknown view '" + viewName.toStdString() + "' (views: " +
                    ui::viewNames().join(", ").toStdString() + ")");
    }
    const QString out = QString::fromStdString(args->value("out"));
    const QString suffix = QFileInfo(out).suffix().toLower();
    if (suffix != "png" && suffix != "svg" && suffix != "pdf" && suffix != "csv") {
        return fail(out.toStdString() + ": use .png, .svg, .pdf or .csv");
    }
    if (QFileInfo::exists(out) && !args->has("force")) {
        return fail(out.toStdString() + " exists; add --force to replace it");
    }
    auto width = args->integer("width", 1100), height = args->integer("height", 850);
    if (!width || !height || *width < 200 || *height < 150 || *width > 10000 || *height > 10000) {
        return fail("--width and --height must be between 200×150 and 10000×10000");
    }
    auto scale = args->number("scale", 1.0);
    if (!scale || !(*scale > 0) || *scale > 8) return fail("--scale must be in (0, 8]");

    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ui::AppState state;
    state.setModelFolder(QString::fromStdString(args->value("model")));
    state.setText(QString::fromStdString(*text));
    auto config = core::readModelConfig(args->value("model"));
    if (!config) return fail(config.error());
    auto run = runSpecFromArguments(*args, config->trained);
    if (!run) return fail(run.error());
    state.setRun(*run);
    auto tau = args->number("tau", 0.1);
    if (!tau || !(*tau > 0) || *tau > 1) return fail("--tau must be in (0, 1]");
    state.setTauScale(*tau);
    state.setLensWanted(viewName == "lens");
    ui::InferenceRequest request{1, state.effectiveFolder(), *text,
                                 ui::InferenceController::captureRequestFor(state),
                                     ui::InferenceController::comparisonRequestFor(state)};
    if (viewName == "attention" || viewName == "heads") {
        // these views draw maps only: no diagnostics, slot activations or comparison
        request.capture = core::mapsOnlyRequest(state.run());
        request.comparison.reset();
    }
    auto response = ui::InferenceController::computeNow(request, terminalLoadOptions("auto"));
    if (!response.result) return fail(response.error.toStdString());
    state.setResult(response.result, response.comparison, response.vocabulary);
    auto layer = args->integer("layer", 0);
    if (!layer || *layer < 0 || *layer >= config->nLayers) {
        return fail("--layer must be between 0 and " + std::to_string(config->nLayers - 1));
    }
    state.setLayer(int(*layer));
    if (args->value("head") == "mean") {
        state.setHead(-1);
    } else {
        auto head = args->integer("head", 0);
        if (!head || *head < 0 || *head >= config->nHeads) {
            return fail("--head must be 'mean' or between 0 and " + std::to_string(config->nHeads - 1));
        }
        state.setHead(int(*head));
    }
    if (args->has("query")) {
        auto query = args->integer("query", -1);
        if (!query || *query < 0 || *query >= int64_t(response.result->tokens.size())) {
            return fail("--query must be a token index below " + std::to_string(response.result->tokens.size()));
        }
        state.setQueryToken(int(*query));
    }
    std::unique_ptr<ui::ExportableView> view(ui::createView(viewName, &state));
    if (auto* map = qobject_cast<ui::AttentionMapView*>(view.get())) map->setLogScale(args->has("log"));
    view->resize(int(*width), int(*height));
    view->setAttribute(Qt::WA_DontShowOnScreen);
    view->show();
    QApplication::processEvents();
    view->refresh();
    QString error;
    if (!view->exportTo(out, *scale, &error)) return fail(error.toStdString());
    std::printf("%s: %s view of %s (%s)\n", qPrintable(out), qPrintable(viewName),
                args->value("model").c_str(), qPrintable(state.provenance()));
    return 0;
}

}  // namespace relulens::app
