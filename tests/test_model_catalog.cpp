// Where the window looks for models: the bundled folder (or RELULENS_RESOURCES), then a user's
// own models in ~/.local/share/relulens/models, listed after the bundled ones and not marked
// bundled; folders without a valid config.json are skipped.
#include <QtTest>

#include <QTemporaryDir>

#include "ui/model_catalog.h"
#include "ui/resource_paths.h"

using namespace relulens::ui;

namespace {

const QString kTinyConfig = QStringLiteral(RELULENS_TEST_DATA "/tiny/config.json");

bool copyConfig(const QString& folder) {
    return QDir().mkpath(folder) && QFile::copy(kTinyConfig, folder + "/config.json");
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
        QCOMPARE(bundled, 8);
        QVERIFY(mine);
        QCOMPARE(mine->name, QString("tiny"));
        QVERIFY(!mine->bundled);
        QCOMPARE(catalog.size(), bundled + 1);
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

private:
    QTemporaryDir home_;
    QByteArray savedHome_;
};

QTEST_MAIN(TestModelCatalog)
#include "test_model_catalog.moc"
