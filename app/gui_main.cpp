#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QMessageBox>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/gui.h"
#include "app/scene_render.h"
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

std::string qtVersionLine() {
    return std::string("Qt ") + qVersion();
}

void installMessageFilter() {
    previousHandler = qInstallMessageHandler(
        [](QtMsgType type, const QMessageLogContext& context, const QString& message) {
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

bool hasDisplay() {
    return !qEnvironmentVariableIsEmpty("DISPLAY") ||
           !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") ||
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
        std::fprintf(
            stderr,
            "relulens: no models found in %s; open a model folder with "
            "relulens inspect --model DIR, or rebuild them with scripts/train_default_models\n",
            qPrintable(ui::ResourcePaths::modelDirs().join(", ")));
        if (!display) return 1;
    }
    if (!display) {
        // No screen: render the main views headless, as `relulens render` would.
        core::Scene scene;
        scene.model = QFileInfo(model).absoluteFilePath().toStdString();
        scene.text = defaultText().toStdString();
        const QString dir = QDir::current().absoluteFilePath("relulens-views");
        QDir().mkpath(dir);
        std::printf("No display found: rendering the main views to PNG files instead.\n");
        auto drawn = renderScene(
            scene, ui::viewNames(), [&](const QString& view) { return dir + "/" + view + ".png"; },
            Frame{1100, 850, 1.0});
        if (!drawn) {
            std::fprintf(stderr, "relulens: %s\n", drawn.error().c_str());
            return 1;
        }
        for (const QString& name : ui::viewNames())
            std::printf("  %s\n", qPrintable(dir + "/" + name + ".png"));
        return 0;
    }
    const QString savedText = Settings::string(Settings::Key::Text);
    state.setText(savedText.isEmpty() ? defaultText() : savedText);
    state.setModelFolder(model);
    Settings::restoreVariants(state);
    Settings::restoreSelection(state);
    ui::InferenceController inference(&state);
    ui::MainWindow window(&state, &inference);
    window.show();
    inference.schedule();
    return app.exec();
}

}  // namespace relulens::app
