// The window on the bundled default models: the catalog finds every model the model card lists
// (resources/models/results.json) next to the executable,
// every view renders on the softmax model, and "trained variant" mode switches to the sibling
// trained with the chosen activation.
#include <QtTest>

#include <QDockWidget>

#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTimer>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "qcustomplot.h"
#include "test_support.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/main_window.h"
#include "ui/map_jobs.h"
#include "ui/model_catalog.h"
#include "ui/resource_paths.h"
#include "ui/stall_probe.h"

using namespace relulens::ui;
using relulens::core::AttentionKind;

class TestDefaultApp : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        QCoreApplication::setOrganizationName("ReluLensTest");
        QCoreApplication::setApplicationName("test_default_app");
        QSettings().clear();
    }

    void catalogFindsTheBundledModels() {
        const auto catalog = ModelCatalog::scanDefault();
        QStringList names;
        for (const auto& m : catalog) {
            if (m.bundled) names << m.name;
        }
        std::ifstream card((ResourcePaths::resourcesDir() + "/models/results.json").toStdString());
        QVERIFY(card.good());
        int listed = 0;
        const auto parsed = nlohmann::json::parse(card);
        for (const auto& m : parsed["models"]) {
            const QString name = QString::fromStdString(m["name"].get<std::string>());
            QVERIFY2(names.contains(name), qPrintable(name));
            ++listed;
        }
        QVERIFY(listed >= 11);
        QVERIFY(QFileInfo(ResourcePaths::sampleTextPath()).exists());
    }

    void windowOnTheDefaultModelAndTrainedVariantMode() {
        AppState state;
        state.setCatalog(ModelCatalog::scanDefault());
        InferenceController inference(&state);
        QFile sample(ResourcePaths::sampleTextPath());
        QVERIFY(sample.open(QIODevice::ReadOnly));
        state.setText(QString::fromUtf8(sample.readAll()));
        state.setModelFolder(ResourcePaths::resourcesDir() + "/models/softmax");
        MainWindow window(&state, &inference);
        window.show();
        QSignalSpy results(&state, &AppState::resultChanged);
        QVERIFY(results.wait(60000));
        QCOMPARE(QString::fromStdString(state.result()->model.name), QString("softmax"));
        QVERIFY(state.result()->trainedWithRun);
        const QString dir = QDir::current().absoluteFilePath("screenshots");
        QDir().mkpath(dir);
        for (auto* view : window.views()) {
            const QImage image = view->renderImage(1.0);
            QVERIFY(image.save(dir + "/default-" + view->viewName() + ".png"));
        }

        // Trained-variant mode: choosing ReLU ÷ n opens the model trained with it.
        state.setMode(VariantMode::TrainedVariant);
        auto run = state.run();
        run.attention.kind = AttentionKind::ReluLen;
        run.attention.lengthExponent = 1.0;
        state.setRun(run);
        QVERIFY(results.wait(60000));
        QCOMPARE(QString::fromStdString(state.result()->model.name), QString("relu-len"));
        QVERIFY(state.result()->trainedWithRun);
        // Same-weights mode swaps the activation on the chosen (softmax) model instead.
        state.setMode(VariantMode::SameWeights);
        QVERIFY(results.wait(60000));
        QCOMPARE(QString::fromStdString(state.result()->model.name), QString("softmax"));
        QVERIFY(!state.result()->trainedWithRun);
    }

    void windowStaysResponsiveDuringAnEightThousandTokenForward() {
        AppState state;
        InferenceController inference(&state);
        QFile sample(ResourcePaths::sampleTextPath());
        QVERIFY(sample.open(QIODevice::ReadOnly));
        const QString chapter = QString::fromUtf8(sample.readAll());
        QString text;
        while (text.size() < 40000) text += chapter + "\n\n";  // well over 8,192 tokens
        state.setModelFolder(ResourcePaths::resourcesDir() + "/models/softmax");
        MainWindow window(&state, &inference);
        window.resize(1500, 1000);
        window.show();
        // The GUI thread only paints: while the worker runs the forward pass, and while the map
        // thread builds tiles, the zoomed tile, the mean of heads, the head grid and the compare
        // panels, the event loop keeps turning. The probe notes its longest stall.
        auto& maps = MapJobs::instance();
        StallProbe probe;
        QElapsedTimer clock;
        int step = 0;
        auto settle = [&] {
            QTest::qWait(50);  // coalescing and refine timers
            const bool done =
                QTest::qWaitFor([&] { return !inference.busy() && maps.pending() == 0; }, 300000);
            qInfo(
                "step %d settled after %lld ms; longest stall so far %.1f ms (slowest event in "
                "it: %s)",
                ++step, (long long)clock.elapsed(), probe.longestMs(), qPrintable(probe.culprit()));
            return done;
        };
        // The window's first paint (every dock laid out and drawn once, 15-22 ms of it the
        // expose event, 38-57 ms in all) is start-up, not the work the probe is for.
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QTest::qWait(100);
        QSignalSpy results(&state, &AppState::resultChanged);
        clock.start();
        probe.start();
        state.setText(text);
        QVERIFY(results.wait(300000));
        const qint64 firstResult = clock.elapsed();
        QVERIFY(settle());
        const auto tokens = state.result()->tokens.size();
        auto* map = qobject_cast<AttentionMapView*>(window.view("attention"));
        map->plot()->xAxis->setRange(1000, 1400);  // zoom in
        map->plot()->yAxis->setRange(1200, 1500);
        QVERIFY(settle());
        QCOMPARE(map->cellBlock(), QSize(1, 1));  // single entries once zoomed
        state.setHead(-1);                        // mean of heads
        QVERIFY(settle());
        window.findChild<QDockWidget*>("headsDock")->raise();
        QVERIFY(settle());
        window.findChild<QDockWidget*>("compareDock")->raise();
        QVERIFY(settle());
        state.setQueryToken(5000);
        QVERIFY(settle());
        // a word typed at the end: only the new tokens run, the rest is reused
        state.setText(text + " and");
        QVERIFY(results.wait(60000));
        QVERIFY(settle());
        QVERIFY2(
            state.result()->reusedTokens >= int64_t(tokens) - 16,
            qPrintable(
                QString("%1 of %2 tokens reused").arg(state.result()->reusedTokens).arg(tokens)));
        // While the person reads, the worker makes room after the rows: the words typed next are
        // written in place, in the storage the result before them sees.
        state.setText(text + " and the");
        QVERIFY(results.wait(60000));
        QVERIFY(settle());
        const void* storage = state.result()->layers[0].slotActivations.data_ptr();
        const auto before = int64_t(state.result()->tokens.size());
        state.setText(text + " and the river");
        QVERIFY(results.wait(60000));
        QVERIFY(settle());
        QCOMPARE(state.result()->reusedTokens, before);
        QCOMPARE(state.result()->layers[0].slotActivations.data_ptr(), storage);
        // A toggle goes to the variant the comparison was captured under: every layer but the
        // top one is taken from the comparison's memory.
        state.toggleSoftmaxRelu();
        QVERIFY(results.wait(60000));
        QVERIFY(settle());
        QCOMPARE(state.result()->reusedLayers, state.result()->model.nLayers - 1);
        const double longest = probe.stop();
        const qint64 elapsed = clock.elapsed();
        qInfo(
            "%zu tokens: first result after %lld ms, everything drawn after %lld ms; %d ticks, "
            "longest stall %.1f ms (the host held every core %.1f ms of it; the longest stall "
            "less that %.1f ms)",
            tokens, (long long)firstResult, (long long)elapsed, probe.ticks(), longest,
            probe.hostMsInLongest(), probe.longestOwnMs());
        QVERIFY2(tokens >= 8192, qPrintable(QString("%1 tokens").arg(tokens)));
        QVERIFY2(firstResult > 300, "the forward pass was too quick to tell anything");
#ifdef RELULENS_SANITIZED
        const double allowed = 1000;  // instrumented widgets draw several times slower
#else
        // The memory slots view pooling its (tokens × slots) heatmap on the GUI thread stalled it
        // for 188-266 ms here; with that on the map thread and the compute threads at a lower
        // priority, 48-92 ms (82-154 ms at the same priority). The sparsity view's tokens × layers
        // map drawing all 10,744 columns took 27 ms of it; pooled to at most 1,024 columns, the
        // longest stall after the window's first paint was 24-41 ms in six of seven runs, and
        // once 120 ms in which the thread handled no event at all (not scheduled, or waiting).
        const double allowed = 175;
#endif
        QVERIFY2(longest < allowed, qPrintable(QString("the event loop stalled for %1 ms (%2)")
                                                   .arg(longest)
                                                   .arg(probe.culprit())));
        QVERIFY2(probe.ticks() > elapsed / 50,
                 qPrintable(QString("%1 ticks in %2 ms").arg(probe.ticks()).arg(elapsed)));
    }
};

QTEST_MAIN(TestDefaultApp)
#include "test_default_app.moc"
