// The window on the bundled default models: the catalog finds all six next to the executable,
// every view renders on the softmax model, and "trained variant" mode switches to the sibling
// trained with the chosen activation.
#include <QtTest>

#include <QSignalSpy>

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
};

QTEST_MAIN(TestDefaultApp)
#include "test_default_app.moc"
