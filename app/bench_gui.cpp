// The window's part of `relulens bench`: an activation toggle through the real state, worker
// thread and widgets until the attention map and sparsity views are redrawn (offscreen), and
// text → capture → attention map view written to a PNG, as `relulens render` does it.
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <functional>
#include <memory>

#include "app/gui.h"
#include "core/capture.h"
#include "core/checkpoint.h"
#include "qcustomplot.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/inference_worker.h"
#include "ui/map_jobs.h"
#include "ui/sparsity_view.h"
#include "ui/stall_probe.h"

namespace relulens::app {

namespace {

constexpr int kTimeoutMs = 300000;

// Returns false on timeout.
bool waitFor(QObject* sender, const char* signal) {
    QEventLoop loop;
    QTimer::singleShot(kTimeoutMs, &loop, [&loop] { loop.exit(1); });
    QObject::connect(sender, signal, &loop, SLOT(quit()));
    return loop.exec() == 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Bench {
    std::unique_ptr<QApplication> app;
    std::unique_ptr<ui::AppState> state;
    std::unique_ptr<ui::InferenceController> inference;
    std::unique_ptr<ui::AttentionMapView> map;
    std::unique_ptr<ui::SparsityView> sparsity;
    std::unique_ptr<ui::AppState> pictureState;
    std::unique_ptr<ui::AttentionMapView> picture;
    QString folder;
};

void showOffscreen(QWidget* w) {
    w->resize(1100, 850);
    w->setAttribute(Qt::WA_DontShowOnScreen);
    w->show();
}

Bench& state() {
    static Bench b;
    return b;
}

Bench& bench(int argc, char** argv) {
    Bench& b = state();
    if (!b.app) {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
        static int count = argc;
        b.app = std::make_unique<QApplication>(count, argv);
        b.state = std::make_unique<ui::AppState>();
        b.inference = std::make_unique<ui::InferenceController>(b.state.get());
        b.map = std::make_unique<ui::AttentionMapView>(b.state.get());
        b.sparsity = std::make_unique<ui::SparsityView>(b.state.get());
        b.pictureState = std::make_unique<ui::AppState>();
        b.picture = std::make_unique<ui::AttentionMapView>(b.pictureState.get());
        for (QWidget* w :
             std::initializer_list<QWidget*>{b.map.get(), b.sparsity.get(), b.picture.get()}) {
            showOffscreen(w);
        }
    }
    return b;
}

// The worker and the map thread both idle. The GUI thread sleeps between events, as it does
// while a person looks: processEvents with a time limit never waits (it returns at once when no
// event is pending), and a GUI thread spinning on it took a core from the worker and, always
// runnable, lost its quick turn after each wake-up, which the stall probe measured as stalls.
bool waitUntilIdle(ui::InferenceController& inference) {
    QElapsedTimer clock;
    clock.start();
    QTimer heartbeat;  // wakes the loop to look again at least every 10 ms
    heartbeat.start(10);
    while (inference.busy() || ui::MapJobs::instance().pending() > 0) {
        if (clock.elapsed() > kTimeoutMs) return false;
        QApplication::processEvents(QEventLoop::WaitForMoreEvents);
    }
    return true;
}

}  // namespace

core::Result<GuiTimings> benchGui(int argc, char** argv, const core::LoadedModel& model,
                                  const std::string& folder, const std::string& text, int repeats) {
    Bench& b = bench(argc, argv);
    GuiTimings timings;
    if (b.folder != QString::fromStdString(folder)) {
        b.folder = QString::fromStdString(folder);
        b.state->setModelFolder(b.folder);
        b.pictureState->setModelFolder(b.folder);
    }
    b.state->setText(QString::fromStdString(text));
    if (!waitFor(b.state.get(), SIGNAL(resultChanged())))
        return core::Error{"no result within 5 minutes"};
    if (!waitUntilIdle(*b.inference)) return core::Error{"the worker did not finish"};
    QApplication::processEvents();

    // Toggle → both views redrawn, from an idle worker (the user looks, then toggles), with the
    // longest time the GUI thread did not turn its event loop meanwhile.
    auto redrawAfter = [&](const std::function<void()>& change) -> core::Result<double> {
        int pending = 2;
        QEventLoop loop;
        auto done = [&] {
            if (--pending == 0) loop.quit();
        };
        auto c1 = QObject::connect(b.map->plot(), &QCustomPlot::afterReplot, &loop, done);
        auto c2 = QObject::connect(b.sparsity->findChild<QCustomPlot*>(), &QCustomPlot::afterReplot,
                                   &loop, done);
        QElapsedTimer timer;
        timer.start();
        change();
        QTimer::singleShot(kTimeoutMs, &loop, &QEventLoop::quit);
        loop.exec();
        QObject::disconnect(c1);
        QObject::disconnect(c2);
        const double ms = double(timer.nsecsElapsed()) / 1e6;
        if (b.state->error().size()) return core::Error{b.state->error().toStdString()};
        if (!waitUntilIdle(*b.inference)) return core::Error{"the worker did not finish"};
        QApplication::processEvents();
        return ms;
    };
    auto toggle = [&] { return redrawAfter([&] { b.state->toggleSoftmaxRelu(); }); };
    std::vector<double> toggles, colds, backs, appends;
    ui::StallProbe probe;
    probe.start();
    // No recent result for the variant toggled to: a capture, which takes every layer but the
    // top one from the memory of the comparison the worker ran under that variant meanwhile.
    for (int r = 0; r < repeats + 1; ++r) {
        b.inference->forgetRecent();
        auto ms = toggle();
        if (!ms) return core::Error{ms.error()};
        if (r > 0) toggles.push_back(*ms);  // the first run warms up
    }
    // The worker's memory dropped too (a toggle before the comparison is done, or to a variant
    // other than the comparison's): a whole capture.
    for (int r = 0; r < repeats + 1; ++r) {
        b.inference->forgetRecent();
        b.inference->forgetMemory();
        auto ms = toggle();
        if (!ms) return core::Error{ms.error()};
        if (r > 0) colds.push_back(*ms);
    }
    // Back to a variant seen moments ago: both variants are recent now.
    for (int r = 0; r < repeats + 1; ++r) {
        auto ms = toggle();
        if (!ms) return core::Error{ms.error()};
        if (r > 0) backs.push_back(*ms);
    }
    // One more word typed at the end: the first tokens' work is reused, only the new ones run.
    QString typed = QString::fromStdString(text);
    for (int r = 0; r < repeats + 1; ++r) {
        typed += " and";
        auto ms = redrawAfter([&] { b.state->setText(typed); });
        if (!ms) return core::Error{ms.error()};
        if (r > 0) appends.push_back(*ms);  // the first may follow another variant's pass
    }
    // A word typed a letter at a time: most letters change the last token, so the pass goes on
    // from the checkpoint a few tokens back rather than from the end.
    std::vector<double> letters;
    typed += " ";
    for (const QChar letter : QString("river")) {
        typed += letter;
        auto ms = redrawAfter([&] { b.state->setText(typed); });
        if (!ms) return core::Error{ms.error()};
        letters.push_back(*ms);
    }
    timings.toggleMs = median(toggles);
    timings.appendLetterMs = median(letters);
    timings.coldToggleMs = median(colds);
    timings.toggleBackMs = median(backs);
    timings.appendWordMs = median(appends);
    timings.stallMs = probe.stop();
    timings.stallEvent = probe.culprit().toStdString();
    if (probe.measuresHost()) {
        timings.stallHostMs = probe.hostMsInLongest();
        timings.stallOwnMs = probe.longestOwnMs();
    }

    // Text → capture → the attention map view in a PNG file.
    QTemporaryDir dir;
    const QString png = dir.filePath("map.png");
    // what `relulens render --view attention` computes
    const auto request = core::mapsOnlyRequest(model.model->info().trained);
    std::vector<double> pictures;
    for (int r = 0; r < repeats + 1; ++r) {
        QElapsedTimer timer;
        timer.start();
        auto result = core::capture(*model.model, model.tokenizer, text, request);
        if (!result) return core::Error{result.error()};
        b.pictureState->setResult(std::make_shared<const core::CaptureResult>(std::move(*result)));
        QString error;
        if (!b.picture->exportTo(png, 1.0, &error)) return core::Error{error.toStdString()};
        if (r > 0) pictures.push_back(double(timer.nsecsElapsed()) / 1e6);
    }
    timings.textToPictureMs = median(pictures);
    return timings;
}

void endBenchGui() {
    Bench& b = state();
    b.picture.reset();
    b.pictureState.reset();
    b.sparsity.reset();
    b.map.reset();
    b.inference.reset();
    b.state.reset();
    b.app.reset();
}

}  // namespace relulens::app
