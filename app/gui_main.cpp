#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QMessageBox>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/gui.h"
#include "core/device.h"
#include "ui/app_state.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/main_window.h"
#include "ui/model_catalog.h"
#include "ui/resource_paths.h"
#include "ui/settings.h"
#include "ui/view_factory.h"

namespace relulens::app {

namespace {
QtMessageHandler previousHandler = nullptr;
}  // namespace

std::string qtVersionLine() { return std::string("Qt ") + qVersion(); }

void installMessageFilter() {
    previousHandler = qInstallMessageHandler([](QtMsgType type, const QMessageLogContext& context,
                                                const QString& message) {
        if (message.contains("does not support propagateSizeHints")) return;
        if (previousHandler) previousHandler(type, context, message);
    });
}

namespace {

using ui::Settings;

QString defaultText() {
    QFile sample(ui::ResourcePaths::sampleTextPath());
    if (sample.open(QIODevice::ReadOnly)) return QString::fromUtf8(sample.readAll()).trimmed();
    return "It is a truth universally acknowledged, that a single man in possession of a good "
           "fortune, must be in want of a wife.";
}

QString defaultModel(const QVector<ui::ModelEntry>& catalog) {
    const QString saved = Settings::string(Settings::Key::ModelFolder);
    if (!saved.isEmpty() && QFileInfo(saved + "/config.json").exists()) return saved;
    for (const auto& m : catalog) {
        if (m.bundled && m.name == "softmax") return m.folder;
    }
    return catalog.isEmpty() ? QString() : catalog.front().folder;
}

void restoreRun(ui::AppState& state) {
    core::RunSpec run;
    if (auto k = core::parseAttentionKind(Settings::string(Settings::Key::Attention).toStdString())) run.attention.kind = *k;
    if (auto h = core::parseFamilyFunction(Settings::string(Settings::Key::FamilyH).toStdString())) run.attention.h = *h;
    run.attention.a = std::clamp(Settings::number(Settings::Key::Exponent), 0.0, 2.0);
    bool isNumber = false;
    const double bias = Settings::value(Settings::Key::SigmoidBias).toDouble(&isNumber);
    if (isNumber && std::isfinite(bias)) run.attention.sigmoidBias = std::clamp(bias, -20.0, 20.0);
    const double sigma = Settings::number(Settings::Key::SsmaxSigma);
    if (std::isfinite(sigma) && sigma > 0) run.attention.ssmaxSigma = std::clamp(sigma, 0.01, 4.0);
    if (auto f = core::parseFfnKind(Settings::string(Settings::Key::Ffn).toStdString())) run.ffn = *f;
    state.setRun(run);
    state.setMode(Settings::integer(Settings::Key::Mode) == 1 ? ui::VariantMode::TrainedVariant
                                                             : ui::VariantMode::SameWeights);
}

bool hasDisplay() {
    return !qEnvironmentVariableIsEmpty("DISPLAY") || !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") ||
           !qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM");
}

}  // namespace

int runGui(int argc, char** argv) {
    const bool display = hasDisplay();
    if (!display) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    QApplication::setOrganizationName("ReluLens");
    QApplication::setApplicationName("ReluLens");
    QApplication::setApplicationVersion(RELULENS_VERSION);
    core::configureThreads();

    ui::AppState state;
    state.setCatalog(ui::ModelCatalog::scanDefault());
    const QString model = defaultModel(state.catalog());
    if (model.isEmpty()) {
        std::fprintf(stderr, "relulens: no models found in %s; open a model folder with "
                             "relulens inspect --model DIR, or rebuild them with scripts/train_default_models\n",
                     qPrintable(ui::ResourcePaths::modelDirs().join(", ")));
        if (!display) return 1;
    }
    if (!display) {
        // No screen: render the main views headless, as `relulens render` would.
        state.setModelFolder(model);
        state.setText(defaultText());
        ui::InferenceRequest request{1, state.effectiveFolder(), state.text().toStdString(),
                                     ui::InferenceController::captureRequestFor(state),
                                     ui::InferenceController::comparisonRequestFor(state)};
        auto response = ui::InferenceController::computeNow(request);
        if (!response.result) {
            std::fprintf(stderr, "relulens: %s\n", qPrintable(response.error));
            return 1;
        }
        state.setResult(response.result, response.comparison, response.vocabulary);
        const QString dir = QDir::current().absoluteFilePath("relulens-views");
        QDir().mkpath(dir);
        std::printf("No display found: rendering the main views to PNG files instead.\n");
        for (const QString& name : ui::viewNames()) {
            std::unique_ptr<ui::ExportableView> view(ui::createView(name, &state));
            view->resize(1100, 850);
            view->setAttribute(Qt::WA_DontShowOnScreen);
            view->show();
            view->refresh();
            QString error;
            const QString path = dir + "/" + name + ".png";
            if (!view->exportTo(path, 1.0, &error)) {
                std::fprintf(stderr, "relulens: %s\n", qPrintable(error));
                return 1;
            }
            std::printf("  %s\n", qPrintable(path));
        }
        return 0;
    }
    const QString savedText = Settings::string(Settings::Key::Text);
    state.setText(savedText.isEmpty() ? defaultText() : savedText);
    state.setModelFolder(model);
    restoreRun(state);
    state.setLayer(Settings::integer(Settings::Key::Layer));
    state.setHead(Settings::integer(Settings::Key::Head));
    ui::InferenceController inference(&state);
    ui::MainWindow window(&state, &inference);
    window.show();
    inference.schedule();
    return app.exec();
}

}  // namespace relulens::app
