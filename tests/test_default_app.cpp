// The window on the bundled default models: the catalog finds all six next to the executable,
// every view renders on the softmax model, and "trained variant" mode switches to the sibling
// trained with the chosen activation.
#include <QtTest>

#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTimer>

#include <algorithm>

#include "test_support.h"
#include "ui/app_state.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/main_window.h"
#include "ui/model_catalog.h"
#include "ui/resource_paths.h"

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
        for (const char* name : {"softmax", "relu-len", "reluformer", "relu", "ffn-softmax", "ffn-softmax-ln"}) {
            QVERIFY2(names.contains(name), name);
        }
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
        run.attention.a = 1.0;
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
        window.show();
        // While the worker runs the forward pass the event loop must keep turning: a 10 ms timer
        // is measured for its longest gap until the first result has arrived and every visible
        // view has redrawn from it (which happens on this thread and is allowed half a second).
        QElapsedTimer clock;
        qint64 last = 0, longestGap = 0;
        int ticks = 0;
        QTimer ticker;
        ticker.setInterval(10);
        connect(&ticker, &QTimer::timeout, [&] {
            const qint64 now = clock.elapsed();
            longestGap = std::max(longestGap, now - last);
            last = now;
            ++ticks;
        });
        QSignalSpy results(&state, &AppState::resultChanged);
        clock.start();
        ticker.start();
        state.setText(text);
        QVERIFY(results.wait(120000));
        ticker.stop();
        const qint64 elapsed = clock.elapsed();
        longestGap = std::max(longestGap, elapsed - last);  // including the views' redraw
        const auto tokens = state.result()->tokens.size();
        qInfo("%zu tokens computed in %lld ms; %d ticks, longest gap %lld ms", tokens,
              (long long)elapsed, ticks, (long long)longestGap);
        QVERIFY2(tokens >= 8192, qPrintable(QString("%1 tokens").arg(tokens)));
        QVERIFY2(elapsed > 300, "the forward pass was too quick to tell anything");
#ifdef RELULENS_SANITIZED
        const qint64 allowedGap = 2000;  // instrumented widgets draw several times slower
#else
        const qint64 allowedGap = 500;
#endif
        QVERIFY2(longestGap < allowedGap, qPrintable(QString("the event loop stalled for %1 ms while %2 "
                                                      "tokens were computed in %3 ms")
                                                  .arg(longestGap).arg(tokens).arg(elapsed)));
        QVERIFY2(ticks > elapsed / 100, qPrintable(QString("%1 ticks in %2 ms").arg(ticks).arg(elapsed)));
        // and the views draw the long input
        for (auto* view : window.views()) {
            QElapsedTimer drawing;
            drawing.start();
            view->refresh();
            const qint64 refreshed = drawing.elapsed();
            QVERIFY(!view->renderImage(1.0).isNull());
            qInfo("%s refreshed in %lld ms, drawn in %lld ms", qPrintable(view->viewName()),
                  (long long)refreshed, (long long)(drawing.elapsed() - refreshed));
        }
    }
};

QTEST_MAIN(TestDefaultApp)
#include "test_default_app.moc"
