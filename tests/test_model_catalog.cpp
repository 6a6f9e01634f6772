// Where the window looks for models: the bundled folder (or RELULENS_RESOURCES), then a user's
// own models in ~/.local/share/relulens/models, listed after the bundled ones and not marked
// bundled; folders without a valid config.json are skipped. The list names each ReluLens
// model's training length, and "trained variant" mode stays among siblings trained at the same
// length.
#include <QtTest>

#include <QTemporaryDir>

#include <fstream>

#include <nlohmann/json.hpp>

#include "ui/app_state.h"
#include "ui/model_catalog.h"
#include "ui/resource_paths.h"

using namespace relulens::ui;

namespace {

const QString kTinyConfig = QStringLiteral(RELULENS_TEST_DATA "/tiny/config.json");

bool copyConfig(const QString& folder) {
    return QDir().mkpath(folder) && QFile::copy(kTinyConfig, folder + "/config.json");
}

// The bundled models as the model card lists them (resources/models/results.json).
QStringList cardModels() {
    std::ifstream in((ResourcePaths::resourcesDir() + "/models/results.json").toStdString());
    QStringList names;
    if (!in) return names;
    const auto card = nlohmann::json::parse(in);
    for (const auto& m : card["models"]) {
        names << QString::fromStdString(m["name"].get<std::string>());
    }
    return names;
}

const ModelEntry* named(const QVector<ModelEntry>& catalog, const QString& name) {
    for (const auto& m : catalog) {
        if (m.bundled && m.name == name) return &m;
    }
    return nullptr;
}

relulens::core::RunSpec attention(relulens::core::AttentionKind kind) {
    relulens::core::RunSpec run;
    run.attention.kind = kind;
    return run;
}

}  // namespace

class TestModelCatalog : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        QVERIFY(home_.isValid());
        savedHome_ = qgetenv("HOME");
        qputenv("HOME", home_.path().toUtf8());
        qunsetenv("RELULENS_RESOURCES");
    }

    void cleanupTestCase() { qputenv("HOME", savedHome_); }

    void userModelsFolderIsSearchedAfterTheBundledOne() {
        const QStringList dirs = ResourcePaths::modelDirs();
        QCOMPARE(dirs.size(), 2);
        QCOMPARE(dirs[0], ResourcePaths::resourcesDir() + "/models");
        QCOMPARE(dirs[1], home_.path() + "/.local/share/relulens/models");
    }

    void userModelsAreListedAndNotMarkedBundled() {
        const QString userModels = home_.path() + "/.local/share/relulens/models";
        QVERIFY(copyConfig(userModels + "/my-model"));
        QVERIFY(QDir().mkpath(userModels + "/not-a-model"));  // no config.json
        QVERIFY(QDir().mkpath(userModels + "/broken"));
        QFile broken(userModels + "/broken/config.json");
        QVERIFY(broken.open(QIODevice::WriteOnly));
        broken.write("{ not json");
        broken.close();

        const auto catalog = ModelCatalog::scanDefault();
        int bundled = 0;
        const ModelEntry* mine = nullptr;
        for (const auto& m : catalog) {
            if (m.bundled) {
                ++bundled;
                QVERIFY2(mine == nullptr, "a bundled model is listed after a user's model");
            }
            QVERIFY2(!m.folder.endsWith("/not-a-model") && !m.folder.endsWith("/broken"),
                     qPrintable(m.folder));
            if (m.folder == userModels + "/my-model") mine = &m;
        }
        const QStringList card = cardModels();
        QVERIFY(card.size() >= 11);
        QCOMPARE(bundled, card.size());  // every model the card describes, and no other
        QVERIFY(mine);
        QCOMPARE(mine->name, QString("tiny"));
        QVERIFY(!mine->bundled);
        QCOMPARE(catalog.size(), bundled + 1);
    }

    void longModelsNameTheirTrainingLength() {
        const auto catalog = ModelCatalog::scanDefault();
        for (const char* name : {"long-softmax", "long-relu-len", "long-reluformer"}) {
            const auto* m = named(catalog, name);
            QVERIFY2(m, name);
            QCOMPARE(m->label(), QString("%1 — trained at 1,024 tokens").arg(name));
        }
        QCOMPARE(named(catalog, "softmax")->label(), QString("softmax — trained at 256 tokens"));
    }

    void trainedVariantModeStaysAtTheOpenModelsTrainingLength() {
        using relulens::core::AttentionKind;
        const auto catalog = ModelCatalog::scanDefault();
        const auto* relu1024 =
            ModelCatalog::trainedWith(catalog, attention(AttentionKind::ReluLen), 1024);
        const auto* relu256 =
            ModelCatalog::trainedWith(catalog, attention(AttentionKind::ReluLen), 256);
        QVERIFY(relu1024 && relu256);
        QCOMPARE(relu1024->name, QString("long-relu-len"));
        QCOMPARE(relu256->name, QString("relu-len"));
        // No sigmoid model was trained at 1,024 tokens: the one trained at 256 is used.
        const auto* sigmoid =
            ModelCatalog::trainedWith(catalog, attention(AttentionKind::Sigmoid), 1024);
        QVERIFY(sigmoid);
        QCOMPARE(sigmoid->name, QString("sigmoid"));

        AppState state;
        state.setCatalog(catalog);
        state.setModelFolder(named(catalog, "long-softmax")->folder);
        state.setMode(VariantMode::TrainedVariant);
        state.setRun(attention(AttentionKind::ReluFormer));
        QCOMPARE(state.effectiveFolder(), named(catalog, "long-reluformer")->folder);
        state.setModelFolder(named(catalog, "softmax")->folder);
        QCOMPARE(state.effectiveFolder(), named(catalog, "reluformer")->folder);
    }

    void resourcesVariableReplacesTheBundledFolder() {
        QTemporaryDir resources;
        QVERIFY(copyConfig(resources.path() + "/models/other"));
        qputenv("RELULENS_RESOURCES", resources.path().toUtf8());
        const QString resourcesDir = ResourcePaths::resourcesDir();
        const auto catalog = ModelCatalog::scanDefault();
        qunsetenv("RELULENS_RESOURCES");
        QCOMPARE(resourcesDir, resources.path());
        QCOMPARE(catalog.size(), 2);  // the replacement's model, then the user's
        QCOMPARE(catalog[0].folder, resources.path() + "/models/other");
        QVERIFY(catalog[0].bundled);
        QVERIFY(!catalog[1].bundled);
    }

    void withoutTheVariableTheBuildTreesResourcesAreFound() {
        // The test runs from build/bin: two folders up is the source tree, as CMake configured it.
        const QString expected = QFileInfo(QStringLiteral(RELULENS_RESOURCES)).canonicalFilePath();
        QVERIFY(!expected.isEmpty());
        QCOMPARE(QFileInfo(ResourcePaths::resourcesDir()).canonicalFilePath(), expected);
        // A variable naming no folder is passed over, not followed.
        qputenv("RELULENS_RESOURCES", (home_.path() + "/no-such-folder").toUtf8());
        const QString ignored = QFileInfo(ResourcePaths::resourcesDir()).canonicalFilePath();
        qunsetenv("RELULENS_RESOURCES");
        QCOMPARE(ignored, expected);
    }

    void aFolderFromElsewhereJoinsTheListOnce() {
        QTemporaryDir elsewhere;
        const QString folder = elsewhere.path() + "/mine";
        QVERIFY(copyConfig(folder));
        QVERIFY(QDir().mkpath(elsewhere.path() + "/empty"));
        const auto catalog = ModelCatalog::scanDefault();
        QVERIFY(!ModelCatalog::byFolder(catalog, folder));
        const auto added = ModelCatalog::withFolder(catalog, folder);
        QCOMPARE(added.size(), catalog.size() + 1);
        QCOMPARE(added.back().folder, folder);
        QCOMPARE(added.back().name, QString("tiny"));
        QVERIFY(!added.back().bundled);
        QCOMPARE(ModelCatalog::byFolder(added, folder), &added.back());
        // listed already: unchanged; a folder with no model: unchanged
        QCOMPARE(ModelCatalog::withFolder(added, folder).size(), added.size());
        QCOMPARE(ModelCatalog::withFolder(catalog, elsewhere.path() + "/empty").size(),
                 catalog.size());
        // a bundled model is not listed twice, nor marked as from elsewhere
        const auto again = ModelCatalog::withFolder(catalog, catalog.front().folder);
        QCOMPARE(again.size(), catalog.size());
        QVERIFY(again.front().bundled);
    }

private:
    QTemporaryDir home_;
    QByteArray savedHome_;
};

QTEST_MAIN(TestModelCatalog)
#include "test_model_catalog.moc"
