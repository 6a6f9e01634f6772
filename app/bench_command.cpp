// relulens bench: time from an activation toggle to the redrawn attention map and sparsity views,
// through the real state, worker thread and widgets (offscreen), at several input lengths.
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/gui.h"
#include "core/tokenizer.h"
#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/inference_worker.h"
#include "ui/resource_paths.h"
#include "ui/sparsity_view.h"

namespace relulens::app {

namespace {

// The first n tokens of `source` repeated as often as needed.
std::string textOfTokens(const core::Tokenizer& tokenizer, const std::string& source, size_t n) {
    std::string text = source;
    while (tokenizer.encode(text).size() < n) text += "\n\n" + source;
    const auto tokens = tokenizer.encode(text);
    return text.substr(0, tokens[n - 1].end);
}

bool waitFor(QObject* sender, const char* signal, int timeoutMs) {
    QEventLoop loop;
    QTimer::singleShot(timeoutMs, &loop, [&loop] { loop.exit(1); });
    QObject::connect(sender, signal, &loop, SLOT(quit()));
    return loop.exec() == 0;
}

}  // namespace

int benchCommand(int argc, char** argv, const std::vector<std::string>& argvRest) {
    auto args = Arguments::parse(argvRest, {{"model"}, {"file"}, {"sizes", true, true},
                                            {"repeats"}, {"json"}});
    if (!args) return fail(args.error());
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    const QString model = args->has("model") ? QString::fromStdString(args->value("model"))
                                             : ui::ResourcePaths::resourcesDir() + "/models/softmax";
    auto tokenizer = core::Tokenizer::load((model + "/tokenizer.model").toStdString());
    if (!tokenizer) return fail(tokenizer.error());
    QFile file(args->has("file") ? QString::fromStdString(args->value("file")) : ui::ResourcePaths::sampleTextPath());
    if (!file.open(QIODevice::ReadOnly)) return fail(file.fileName().toStdString() + ": cannot open");
    const std::string source = file.readAll().toStdString();
    std::vector<size_t> sizes = {64, 256, 1024};
    if (args->has("sizes")) {
        sizes.clear();
        for (const auto& s : args->values("sizes")) sizes.push_back(size_t(std::stoul(s)));
    }
    auto repeats = args->integer("repeats", 9);
    if (!repeats || *repeats < 1) return fail("--repeats must be positive");

    ui::AppState state;
    ui::InferenceController inference(&state);
    state.setModelFolder(model);
    ui::AttentionMapView map(&state);
    ui::SparsityView sparsity(&state);
    for (QWidget* w : std::initializer_list<QWidget*>{&map, &sparsity}) {
        w->resize(1100, 850);
        w->setAttribute(Qt::WA_DontShowOnScreen);
        w->show();
    }
    nlohmann::json results = nlohmann::json::array();
    std::printf("toggle → redrawn attention map and sparsity views (%s, median of %lld)\n",
                qPrintable(model), (long long)*repeats);
    std::printf("%8s %12s %12s %12s\n", "tokens", "median ms", "min ms", "max ms");
    for (size_t n : sizes) {
        state.setText(QString::fromStdString(textOfTokens(*tokenizer, source, n)));
        if (!waitFor(&state, SIGNAL(resultChanged()), 120000)) return fail("no result");
        QApplication::processEvents();
        std::vector<double> times;
        for (int r = 0; r < *repeats + 1; ++r) {
            int pending = 2;
            QEventLoop loop;
            auto done = [&] { if (--pending == 0) loop.quit(); };
            auto c1 = QObject::connect(map.plot(), &QCustomPlot::afterReplot, &loop, done);
            auto c2 = QObject::connect(sparsity.findChild<QCustomPlot*>(), &QCustomPlot::afterReplot, &loop, done);
            QElapsedTimer timer;
            timer.start();
            state.toggleSoftmaxRelu();
            QTimer::singleShot(120000, &loop, &QEventLoop::quit);
            loop.exec();
            QObject::disconnect(c1);
            QObject::disconnect(c2);
            if (r > 0) times.push_back(double(timer.nsecsElapsed()) / 1e6);  // first run warms up
        }
        std::sort(times.begin(), times.end());
        const double median = times[times.size() / 2];
        std::printf("%8zu %12.1f %12.1f %12.1f\n", state.result()->tokens.size(), median, times.front(), times.back());
        results.push_back({{"tokens", state.result()->tokens.size()}, {"median_ms", median},
                           {"min_ms", times.front()}, {"max_ms", times.back()}});
    }
    if (args->has("json")) {
        std::ofstream out(args->value("json"));
        out << nlohmann::json{{"model", model.toStdString()}, {"toggle_to_redraw", results}}.dump(2) << "\n";
    }
    return 0;
}

}  // namespace relulens::app
