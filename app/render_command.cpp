// relulens render: any view rendered headless with the same widgets as the window, for one
// view given on the command line, or for every step of a saved scene or lesson.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <cstdio>
#include <functional>
#include <memory>

#include "app/commands.h"
#include "app/gui.h"
#include "app/scene_render.h"
#include "core/atomic_file.h"
#include "core/device.h"
#include "core/scene.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/model_catalog.h"
#include "ui/scene_state.h"
#include "ui/view_factory.h"

namespace relulens::app {

namespace {

core::Result<Frame> frameFromArguments(const Arguments& args) {
    auto width = args.integer("width", 1100), height = args.integer("height", 850);
    if (!width || !height || *width < 200 || *height < 150 || *width > 10000 || *height > 10000) {
        return core::Error{"--width and --height must be between 200×150 and 10000×10000"};
    }
    auto scale = args.number("scale", 1.0);
    if (!scale || !(*scale > 0) || *scale > 8) return core::Error{"--scale must be in (0, 8]"};
    return Frame{int(*width), int(*height), *scale};
}

// relulens render --scene FILE | --lesson FILE --out DIR ...
int renderSavedScenes(int argc, char** argv, const Arguments& args) {
    if (args.has("scene") == args.has("lesson"))
        return fail("render takes one of --scene FILE and --lesson FILE");
    if (!args.has("out")) return fail("render --scene/--lesson needs --out DIR");
    if (args.has("model") || args.has("text") || args.has("file")) {
        return fail(
            "--model, --text and --file come from the scene; leave them out with --scene or "
            "--lesson");
    }
    const std::string format = args.value("format", "png");
    if (format != "png" && format != "svg" && format != "pdf")
        return fail("--format must be png, svg or pdf");
    auto frame = frameFromArguments(args);
    if (!frame) return fail(frame.error());
    const QString viewOption = QString::fromStdString(args.value("view"));
    if (!viewOption.isEmpty() && viewOption != "all" && !ui::viewNames().contains(viewOption)) {
        return fail("unknown view '" + viewOption.toStdString() + "' (views: all, " +
                    ui::viewNames().join(", ").toStdString() + ")");
    }
    const bool lesson = args.has("lesson");
    const QString file = QString::fromStdString(args.value(lesson ? "lesson" : "scene"));
    const QString fileDir = QFileInfo(file).absolutePath();
    std::vector<core::Scene> scenes;
    QStringList prefixes;
    if (lesson) {
        auto read = core::readLessonFile(file.toStdString());
        if (!read) return fail(read.error());
        for (const auto& n : read->notes) std::fprintf(stderr, "relulens: note: %s\n", n.c_str());
        for (size_t i = 0; i < read->value.steps.size(); ++i) {
            scenes.push_back(ui::sceneFromFile(read->value.steps[i], fileDir));
            prefixes << QString("step-%1").arg(i + 1, 2, 10, QChar('0'));
        }
    } else {
        auto read = core::readSceneFile(file.toStdString());
        if (!read) return fail(read.error());
        for (const auto& n : read->notes) std::fprintf(stderr, "relulens: note: %s\n", n.c_str());
        scenes.push_back(ui::sceneFromFile(read->value, fileDir));
        prefixes << QFileInfo(file).completeBaseName();
    }
    // Every file to be written, checked before anything is computed.
    std::vector<QStringList> viewsOf;
    QStringList targets;
    const QString out = QString::fromStdString(args.value("out"));
    for (size_t i = 0; i < scenes.size(); ++i) {
        QStringList views;
        if (viewOption == "all") {
            views = ui::viewNames();
        } else {
            const QString own = QString::fromStdString(scenes[i].view);
            views << (!viewOption.isEmpty()           ? viewOption
                      : ui::viewNames().contains(own) ? own
                                                      : "attention");
        }
        viewsOf.push_back(views);
        for (const auto& v : views)
            targets << out + "/" + prefixes[int(i)] + "-" + v + "." +
                           QString::fromStdString(format);
        if (lesson || !scenes[i].caption.empty())
            targets << out + "/" + prefixes[int(i)] + "-caption.txt";
    }
    if (!args.has("force")) {
        for (const auto& t : targets) {
            if (QFileInfo::exists(t))
                return fail(t.toStdString() + " exists; add --force to replace the files");
        }
    }
    if (!QDir().mkpath(out)) return fail(out.toStdString() + ": cannot create the folder");
    startOffscreen();
    QApplication app(argc, argv);
    for (size_t i = 0; i < scenes.size(); ++i) {
        const QString prefix = out + "/" + prefixes[int(i)];
        auto drawn = renderScene(
            scenes[i], viewsOf[i],
            [&](const QString& v) {
                return prefix + "-" + v + "." + QString::fromStdString(format);
            },
            *frame);
        if (!drawn)
            return fail((lesson ? "step " + std::to_string(i + 1) + ": " : std::string()) +
                        drawn.error());
        for (const auto& v : viewsOf[i])
            std::printf("%s-%s.%s\n", qPrintable(prefix), qPrintable(v), format.c_str());
        if (lesson || !scenes[i].caption.empty()) {
            const std::string captionPath = (prefix + "-caption.txt").toStdString();
            if (auto s = core::writeTextAtomically(captionPath, scenes[i].caption + "\n"); !s)
                return fail(s.error());
            std::printf("%s\n", captionPath.c_str());
        }
    }
    return 0;
}

}  // namespace

int renderCommand(int argc, char** argv, const std::vector<std::string>& argvRest) {
    auto args = Arguments::parse(argvRest, withVariantOptions({{"model"},
                                                               {"text"},
                                                               {"file"},
                                                               {"view"},
                                                               {"layer"},
                                                               {"head"},
                                                               {"query"},
                                                               {"override", true, true},
                                                               {"ablate", true, true},
                                                               {"tau"},
                                                               {"width"},
                                                               {"height"},
                                                               {"scale"},
                                                               {"out"},
                                                               {"log", false},
                                                               {"force", false},
                                                               {"scene"},
                                                               {"lesson"},
                                                               {"format"}}));
    if (!args) return fail(args.error());
    if (args->has("scene") || args->has("lesson")) return renderSavedScenes(argc, argv, *args);
    if (!args->has("model") || !args->has("view") || !args->has("out")) {
        return fail(
            "render needs --model DIR, --view NAME and --out FILE (or --scene/--lesson FILE --out "
            "DIR)");
    }
    auto text = textFromArguments(*args);
    if (!text) return fail(text.error());
    const QString viewName = QString::fromStdString(args->value("view"));
    if (!ui::viewNames().contains(viewName)) {
        return fail("unknown view '" + viewName.toStdString() +
                    "' (views: " + ui::viewNames().join(", ").toStdString() + ")");
    }
    const QString out = QString::fromStdString(args->value("out"));
    const QString suffix = QFileInfo(out).suffix().toLower();
    if (suffix != "png" && suffix != "svg" && suffix != "pdf" && suffix != "csv") {
        return fail(out.toStdString() + ": use .png, .svg, .pdf or .csv");
    }
    if (QFileInfo::exists(out) && !args->has("force")) {
        return fail(out.toStdString() + " exists; add --force to replace it");
    }
    auto frame = frameFromArguments(*args);
    if (!frame) return fail(frame.error());
    const std::string model = args->value("model");
    auto config = core::readModelConfig(model);
    if (!config) return fail(config.error());
    // The command line is one scene.
    core::Scene scene;
    scene.model = QFileInfo(QString::fromStdString(model)).absoluteFilePath().toStdString();
    scene.text = *text;
    scene.view = viewName.toStdString();
    scene.logScale = args->has("log");
    auto run = runSpecFromArguments(*args, config->trained);
    if (!run) return fail(run.error());
    scene.run = *run;
    auto tau = args->number("tau", 0.1);
    if (!tau || !(*tau > 0) || *tau > 1) return fail("--tau must be in (0, 1]");
    scene.tau = *tau;
    auto layer = args->integer("layer", 0);
    if (!layer || *layer < 0 || *layer >= config->nLayers) {
        return fail("--layer must be between 0 and " + std::to_string(config->nLayers - 1));
    }
    scene.layer = int(*layer);
    if (args->value("head") == "mean") {
        scene.head = -1;
    } else {
        auto head = args->integer("head", 0);
        if (!head || *head < 0 || *head >= config->nHeads) {
            return fail("--head must be 'mean' or between 0 and " +
                        std::to_string(config->nHeads - 1));
        }
        scene.head = int(*head);
    }
    if (args->has("query")) {
        auto query = args->integer("query", -1);
        if (!query || *query < 0) return fail("--query must be a token index from 0");
        scene.query = int(*query);
    }
    startOffscreen();
    QApplication app(argc, argv);
    auto drawn = renderScene(
        scene, {viewName}, [&](const QString&) { return out; }, *frame,
        /*strict=*/true);
    if (!drawn) return fail(drawn.error());
    std::printf("%s: %s view of %s (%s)\n", qPrintable(out), qPrintable(viewName), model.c_str(),
                qPrintable(*drawn));
    return 0;
}

}  // namespace relulens::app
