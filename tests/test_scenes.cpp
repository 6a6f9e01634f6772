// Scenes and lessons: the file format read against hand-written JSON, bad fields kept out with a
// note, a scene saved and opened again giving the same request, view state and pixels, a missing
// model reported with the rest applied, a model folder travelling with its scene, lesson stepping
// (panel and Page Down) applying every field, captions in presentation mode, and
// `relulens render --scene/--lesson` writing one file per step and view, for the shipped lessons
// too.
#include <QtTest>

#include <QDockWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>

#include "core/scene.h"
#include "qcustomplot.h"
#include "test_support.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/lesson_panel.h"
#include "ui/main_window.h"
#include "ui/model_catalog.h"
#include "ui/scene_state.h"
#include "ui/settings.h"
#include "ui/view_factory.h"

using namespace relulens;
using namespace relulens::ui;
using nlohmann::json;

namespace {

const QString kText =
    "It is a truth universally acknowledged, that a single man in possession "
    "of a good fortune, must be in want of a wife.";

QString tinyModel() {
    return QString::fromStdString(test::dataPath("tiny"));
}

int distinctColours(const QImage& image) {
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 3) {
        for (int x = 0; x < image.width(); x += 3) colours.insert(image.pixel(x, y));
    }
    return colours.size();
}

bool copyFolder(const QString& from, const QString& to) {
    QDir().mkpath(to);
    for (const auto& name : QDir(from).entryList(QDir::Files)) {
        if (!QFile::copy(from + "/" + name, to + "/" + name)) return false;
    }
    return true;
}

QString writeJson(const QString& path, const json& j) {
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly)) return QString();
    file.write(QByteArray::fromStdString(j.dump(2)));
    return path;
}

// A relulens command's exit status and output.
std::pair<int, QString> runRelulens(const QStringList& args) {
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(QString::fromStdString(test::binPath("relulens")), args);
    if (!process.waitForFinished(600000)) return {-1, "timed out"};
    return {process.exitCode(), QString::fromUtf8(process.readAll())};
}

}  // namespace

class TestScenes : public QObject {
    Q_OBJECT
    AppState* state_ = nullptr;
    InferenceController* inference_ = nullptr;
    MainWindow* window_ = nullptr;

    bool waitForResult() {
        QSignalSpy spy(state_, &AppState::resultChanged);
        return spy.wait(20000);
    }
    // The attention map as a fresh view of the state exports it. (The window's own view keeps
    // axis margins laid out for longer tokens shown earlier, a QCustomPlot layout history that
    // is not part of a scene.)
    QImage freshMap() {
        std::unique_ptr<ExportableView> view(createView("attention", state_));
        view->resize(900, 700);
        view->setAttribute(Qt::WA_DontShowOnScreen);
        view->show();
        QApplication::processEvents();
        applySceneMap(window_->currentScene(), *qobject_cast<AttentionMapView*>(view.get()));
        view->refresh();
        return view->renderImage(1.0);
    }
    AttentionMapView* map() const {
        return qobject_cast<AttentionMapView*>(window_->view("attention"));
    }
    // Opens a scene or steps a lesson and waits until the result the scene asks for is shown.
    template <typename F>
    bool applyAndWait(F&& apply) {
        QSignalSpy spy(state_, &AppState::resultChanged);
        apply();
        if (!spy.wait(20000)) return false;
        QTest::qWait(50);  // the queued replots
        return true;
    }

private Q_SLOTS:
    void initTestCase() {
        QCoreApplication::setOrganizationName("ReluLensTest");
        QCoreApplication::setApplicationName("test_scenes");
        QSettings().clear();
        state_ = new AppState;
        state_->setCatalog(ModelCatalog::scan({QFileInfo(tinyModel()).absolutePath()}));
        inference_ = new InferenceController(state_);
        state_->setModelFolder(tinyModel());
        state_->setText(kText);
        window_ = new MainWindow(state_, inference_);
        window_->resize(1500, 1000);
        window_->show();
        QVERIFY(waitForResult());
    }

    void cleanupTestCase() {
        delete window_;
        delete inference_;
        delete state_;
    }

    // The format as README.md documents it, written by hand: every field lands where it should.
    void handWrittenSceneReads() {
        const json j = json::parse(R"({
          "relulens_scene": 1,
          "model": "softmax",
          "text": "Call me Ishmael.",
          "run": {"attention": {"variant": "family", "h": "relu2", "a": 0.5}, "ffn": "gelu",
                  "overrides": [{"layer": 2, "attention": {"variant": "relu_len", "a": 1.0}},
                                {"layer": 1, "head": 3, "ablation": "uniform"}]},
          "mode": "trained_variant",
          "tau": 0.25,
          "selection": {"layer": 3, "head": "mean", "query": 4, "slot": 17},
          "view": "memory",
          "attention_map": {"zoom": {"query_begin": 2, "query_end": 9, "key_begin": 1, "key_end": 7},
                            "pooling": "mean", "scale": "log"},
          "caption": "Look at the diagonal."
        })");
        auto read = core::sceneFromJson(j);
        QVERIFY2(read, read.error().c_str());
        QVERIFY(read->notes.empty());
        const core::Scene& s = read->value;
        QCOMPARE(s.model, std::string("softmax"));
        QCOMPARE(s.text, std::string("Call me Ishmael."));
        QCOMPARE(s.run.attention.kind, core::AttentionKind::Family);
        QCOMPARE(s.run.attention.familyFunction, core::FamilyFunction::Relu2);
        QCOMPARE(s.run.attention.lengthExponent, 0.5);
        QCOMPARE(s.run.ffn, core::FfnKind::Gelu);
        QCOMPARE(s.run.overrides.size(), size_t(2));
        QCOMPARE(s.run.overrides[0].label(), std::string("2=relu_len"));
        QCOMPARE(s.run.overrides[1].label(), std::string("1:3=uniform"));
        QVERIFY(s.trainedVariant);
        QCOMPARE(s.tau, 0.25);
        QCOMPARE(s.layer, 3);
        QCOMPARE(s.head, -1);
        QCOMPARE(s.query, 4);
        QCOMPARE(s.slot, 17);
        QCOMPARE(s.view, std::string("memory"));
        QVERIFY(s.zoom && *s.zoom == (core::ZoomRegion{2, 9, 1, 7}));
        QCOMPARE(s.pooling, core::Pooling::Mean);
        QVERIFY(s.logScale);
        QCOMPARE(s.caption, std::string("Look at the diagonal."));
        // written and read again: the same scene
        auto again = core::sceneFromJson(json::parse(core::sceneToJson(s).dump()));
        QVERIFY(again && again->notes.empty());
        QCOMPARE(core::sceneToJson(again->value), core::sceneToJson(s));
        QCOMPARE(again->value.run.overrides, s.run.overrides);
    }

    // A field that cannot be read takes its default and says so; the others are kept. A file
    // from before a field existed reads with the default; a newer one is read with a note.
    void badFieldsAreNotedAndTheRestKept() {
        const json j = json::parse(R"({
          "relulens_scene": 1, "model": "softmax", "text": "kept",
          "run": {"attention": "no-such-variant", "ffn": 7,
                  "overrides": [{"layer": -1, "attention": "relu"}, {"layer": 1, "head": 0, "ablation": "zero"}]},
          "tau": 5, "selection": {"layer": 2, "head": 1},
          "attention_map": {"zoom": {"query_begin": 5, "query_end": 2, "key_begin": 0, "key_end": 3}, "scale": "cubic"}
        })");
        auto read = core::sceneFromJson(j);
        QVERIFY(read);
        const auto& notes = read->notes;
        QCOMPARE(int(notes.size()), 6);
        auto noted = [&](const char* part) {
            return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) {
                return n.find(part) != std::string::npos;
            });
        };
        QVERIFY(noted("run.attention"));
        QVERIFY(noted("run.ffn"));
        QVERIFY(noted("run.overrides[0]"));
        QVERIFY(noted("'tau'"));
        QVERIFY(noted("'zoom'"));
        QVERIFY(noted("'scale'"));
        QCOMPARE(read->value.text, std::string("kept"));
        QCOMPARE(read->value.layer, 2);
        QCOMPARE(read->value.head, 1);
        QCOMPARE(read->value.run.overrides.size(), size_t(1));
        QCOMPARE(read->value.run.overrides[0].label(), std::string("1:0=zero"));
        QCOMPARE(read->value.tau, 0.1);
        QVERIFY(!read->value.zoom);

        auto older = core::sceneFromJson(
            json::parse(R"({"relulens_scene": 1, "model": "softmax", "text": "a"})"));
        QVERIFY(older && older->notes.empty());
        QCOMPARE(older->value.view, std::string("attention"));
        QCOMPARE(older->value.run.attention.kind, core::AttentionKind::Softmax);
        auto newer = core::sceneFromJson(json::parse(
            R"({"relulens_scene": 7, "model": "softmax", "text": "a", "hologram": 1})"));
        QVERIFY(newer);
        QCOMPARE(int(newer->notes.size()), 1);
        QVERIFY(newer->notes[0].find("newer ReluLens") != std::string::npos);

        QVERIFY(!core::sceneFromJson(json::parse(R"({"model": "softmax"})")));
        QVERIFY(!core::lessonFromJson(json::parse(R"({"relulens_lesson": 1, "steps": []})")));
        auto lesson = core::lessonFromJson(json::parse(R"({"relulens_lesson": 1, "title": "t",
            "steps": ["not a scene", {"model": "softmax", "text": "b", "caption": "c"}]})"));
        QVERIFY(lesson);
        QCOMPARE(lesson->value.steps.size(), size_t(1));
        QCOMPARE(lesson->value.steps[0].caption, std::string("c"));
        QCOMPARE(int(lesson->notes.size()), 1);
        QTemporaryDir dir;
        QFile junk(dir.filePath("junk.relulens"));
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write("{ not json");
        junk.close();
        auto bad = core::readSceneFile(junk.fileName().toStdString());
        QVERIFY(!bad);
        QVERIFY2(bad.error().find("not valid JSON") != std::string::npos, bad.error().c_str());
    }

    // Save → change everything → open: the same request, selection, view state and pixels.
    void sceneRoundTrip() {
        using core::AttentionKind;
        core::RunSpec run;
        run.attention.kind = AttentionKind::ReluLen;
        run.attention.lengthExponent = 0.5;
        core::AttentionOverride layerOne;
        layerOne.layer = 1;
        layerOne.head = 0;
        layerOne.spec.kind = AttentionKind::Sparsemax;
        core::AttentionOverride ablated;
        ablated.layer = 0;
        ablated.head = 1;
        ablated.ablation = core::Ablation::Uniform;
        run.overrides = {layerOne, ablated};
        QVERIFY(applyAndWait([&] {
            state_->setRun(run);
            state_->setTauScale(0.2);
        }));
        state_->setLayer(1);
        state_->setHead(1);
        state_->setQueryToken(5);
        state_->setSlot(3);
        map()->setLogScale(true);
        map()->setPooling(core::Pooling::Mean);
        map()->setZoom(core::ZoomRegion{2, 9, 1, 7});
        window_->raiseView("sparsity");
        window_->raiseView("attention");
        QTest::qWait(100);
        const auto request = InferenceController::captureRequestFor(*state_);
        const QImage before = freshMap();
        QVERIFY(distinctColours(before) > 20);

        QTemporaryDir dir;
        const QString path = dir.filePath("scene.relulens");
        QCOMPARE(window_->saveSceneFile(path), QString());
        // the file names the bundled model by name
        auto saved = core::readSceneFile(path.toStdString());
        QVERIFY(saved);
        QCOMPARE(saved->value.model, std::string("tiny"));

        // everything changed
        QVERIFY(applyAndWait([&] {
            window_->editor()->setPlainText("Something else entirely, and shorter.");
            state_->setRun(core::RunSpec{});
            state_->setTauScale(0.1);
        }));
        state_->setLayer(0);
        state_->setHead(0);
        state_->setSlot(-1);
        map()->setLogScale(false);
        map()->setPooling(core::Pooling::Max);
        window_->raiseView("memory");
        QVERIFY(freshMap() != before);

        QStringList notes;
        QVERIFY(applyAndWait([&] { QCOMPARE(window_->openSceneFile(path, &notes), QString()); }));
        QVERIFY2(notes.isEmpty(), qPrintable(notes.join("; ")));
        const auto reopened = InferenceController::captureRequestFor(*state_);
        QVERIFY(core::sameVariants(reopened.run, request.run));
        QCOMPARE(reopened.run.overrides, request.run.overrides);
        QCOMPARE(reopened.tauScale, request.tauScale);
        QCOMPARE(state_->text(), kText);
        QCOMPARE(window_->editor()->toPlainText(), kText);
        QCOMPARE(state_->modelFolder(), QFileInfo(tinyModel()).absoluteFilePath());
        QCOMPARE(state_->layer(), 1);
        QCOMPARE(state_->head(), 1);
        QCOMPARE(state_->queryToken(), 5);
        QCOMPARE(state_->slot(), 3);
        QVERIFY(map()->logScale());
        QCOMPARE(map()->pooling(), core::Pooling::Mean);
        QVERIFY(map()->zoom() && *map()->zoom() == (core::ZoomRegion{2, 9, 1, 7}));
        QCOMPARE(QString::fromStdString(window_->currentScene().view), QString("attention"));
        const QImage after = freshMap();
        if (after != before) {
            before.save("scene_before.png");
            after.save("scene_after.png");
        }
        QCOMPARE(after, before);
        // and the same file again, byte for byte
        const QString second = dir.filePath("again.relulens");
        QCOMPARE(window_->saveSceneFile(second), QString());
        QFile a(path), b(second);
        QVERIFY(a.open(QIODevice::ReadOnly) && b.open(QIODevice::ReadOnly));
        QCOMPARE(a.readAll(), b.readAll());
    }

    // A scene whose model is not here: said, and everything else applied on the open model.
    void missingModelKeepsTheRest() {
        const QString folderBefore = state_->modelFolder();
        core::Scene scene = window_->currentScene();
        scene.model = "no-such-model";
        scene.text = "The rest of the scene still applies.";
        scene.layer = 0;
        scene.head = -1;
        scene.run = core::RunSpec{};
        scene.run.attention.kind = core::AttentionKind::Sigmoid;
        QStringList notes;
        QVERIFY(applyAndWait([&] { notes = window_->applyScene(scene); }));
        QCOMPARE(notes.size(), 1);
        QVERIFY2(notes[0].contains("no-such-model") && notes[0].contains("open model is kept"),
                 qPrintable(notes[0]));
        QCOMPARE(state_->modelFolder(), folderBefore);
        QCOMPARE(state_->text(), QString::fromStdString(scene.text));
        QCOMPARE(state_->result()->run.attention.kind, core::AttentionKind::Sigmoid);
        QCOMPARE(state_->head(), -1);
        // an override for a layer the model lacks is left out, with a note
        core::AttentionOverride high;
        high.layer = 5;
        scene.model = "tiny";
        scene.run.overrides = {high};
        notes = window_->applyScene(scene);
        QCOMPARE(notes.size(), 1);
        QVERIFY2(notes[0].contains("5=softmax") && notes[0].contains("lacks"),
                 qPrintable(notes[0]));
        QVERIFY(state_->run().overrides.empty());
        QVERIFY(waitForResult() || state_->result());
    }

    // A model folder beside the scene is written relative to it and found after the two move.
    void modelFolderTravelsWithTheScene() {
        QTemporaryDir root;
        const QString pack = root.filePath("pack");
        QVERIFY(copyFolder(tinyModel(), pack + "/models/my-model"));
        core::Scene scene = window_->currentScene();
        scene.model = (pack + "/models/my-model").toStdString();
        scene.text = "A model that travels with its scene.";
        QVERIFY(window_->applyScene(scene).isEmpty());
        QCOMPARE(state_->modelFolder(), pack + "/models/my-model");
        QCOMPARE(window_->saveSceneFile(pack + "/scene.relulens"), QString());
        auto saved = core::readSceneFile((pack + "/scene.relulens").toStdString());
        QVERIFY(saved);
        QCOMPARE(saved->value.model, std::string("./models/my-model"));
        QVERIFY(QDir().rename(pack, root.filePath("moved")));
        QVERIFY(applyAndWait([&] {
            window_->applyScene(window_->currentScene());
            state_->setModelFolder(tinyModel());
        }));
        QStringList notes;
        QCOMPARE(window_->openSceneFile(root.filePath("moved/scene.relulens"), &notes), QString());
        QVERIFY2(notes.isEmpty(), qPrintable(notes.join("; ")));
        QCOMPARE(state_->modelFolder(), root.filePath("moved/models/my-model"));
        QVERIFY(waitForResult());
        QCOMPARE(QString::fromStdString(state_->result()->tokens.empty() ? "" : "ok"),
                 QString("ok"));
        state_->setModelFolder(tinyModel());
        QVERIFY(waitForResult());
    }

    // Steps built in the panel; stepping (buttons' slots and Page Down / Page Up) applies every
    // field; the caption shows over the views in presentation mode only; saved and reopened.
    void lessonStepping() {
        auto* panel = window_->lessonPanel();
        QVERIFY(panel);
        // step 1: softmax, layer 0 head 0, token 3, the attention map zoomed
        QVERIFY(applyAndWait([&] {
            window_->editor()->setPlainText(kText);
            state_->setRun(core::RunSpec{});
            state_->setTauScale(0.1);
        }));
        state_->setLayer(0);
        state_->setHead(0);
        state_->setQueryToken(3);
        state_->setSlot(-1);
        map()->setZoom(core::ZoomRegion{0, 6, 0, 6});
        map()->setLogScale(false);
        window_->raiseView("attention");
        panel->addCurrentScene("First: softmax.");
        // step 2: ReLU ÷ n, layer 1, mean of heads, another text, slot 7, the sparsity view
        core::RunSpec relu;
        relu.attention.kind = core::AttentionKind::ReluLen;
        QVERIFY(applyAndWait([&] {
            window_->editor()->setPlainText("A second text for the second step of the lesson.");
            state_->setRun(relu);
            state_->setTauScale(0.3);
        }));
        state_->setLayer(1);
        state_->setHead(-1);
        state_->setQueryToken(8);
        state_->setSlot(7);
        map()->setZoom(std::nullopt);
        map()->setLogScale(true);
        window_->raiseView("sparsity");
        panel->addCurrentScene("Second: ReLU ÷ n.");
        QCOMPARE(int(panel->lesson().steps.size()), 2);
        panel->moveStep(1, 0);
        panel->moveStep(0, 1);
        QCOMPARE(panel->lesson().steps[0].caption, std::string("First: softmax."));

        auto checkFirst = [&] {
            QCOMPARE(state_->text(), kText);
            QCOMPARE(state_->result()->run.attention.kind, core::AttentionKind::Softmax);
            QCOMPARE(state_->tauScale(), 0.1);
            QCOMPARE(state_->layer(), 0);
            QCOMPARE(state_->head(), 0);
            QCOMPARE(state_->queryToken(), 3);
            QCOMPARE(state_->slot(), -1);
            QVERIFY(map()->zoom() && *map()->zoom() == (core::ZoomRegion{0, 6, 0, 6}));
            QVERIFY(!map()->logScale());
            QCOMPARE(QString::fromStdString(window_->currentScene().view), QString("attention"));
        };
        auto checkSecond = [&] {
            QCOMPARE(state_->text(), QString("A second text for the second step of the lesson."));
            QCOMPARE(state_->result()->run.attention.kind, core::AttentionKind::ReluLen);
            QCOMPARE(state_->tauScale(), 0.3);
            QCOMPARE(state_->layer(), 1);
            QCOMPARE(state_->head(), -1);
            QCOMPARE(state_->queryToken(), 8);
            QCOMPARE(state_->slot(), 7);
            QVERIFY(!map()->zoom());
            QVERIFY(map()->logScale());
            QCOMPARE(QString::fromStdString(window_->currentScene().view), QString("sparsity"));
        };
        QVERIFY(applyAndWait([&] { panel->goTo(0); }));
        checkFirst();
        QCOMPARE(window_->shownCaption(), QString());  // not in presentation mode
        window_->setPresentationMode(true);
        QCOMPARE(window_->shownCaption(), QString("First: softmax."));
        // Page Down, with a view (not the text editor) focused
        window_->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(window_));
        window_->view("sparsity")->setFocus();
        QVERIFY(
            applyAndWait([&] { QTest::keyClick(window_->view("sparsity"), Qt::Key_PageDown); }));
        QCOMPARE(panel->currentStep(), 1);
        checkSecond();
        QCOMPARE(window_->shownCaption(), QString("Second: ReLU ÷ n."));
        window_->grab().save(QDir::current().absoluteFilePath("lesson_presentation.png"));
        QVERIFY(applyAndWait([&] { QTest::keyClick(window_->view("sparsity"), Qt::Key_PageUp); }));
        QCOMPARE(panel->currentStep(), 0);
        checkFirst();
        window_->setPresentationMode(false);
        QCOMPARE(window_->shownCaption(), QString());

        QTemporaryDir dir;
        const QString path = dir.filePath("lesson.relulens");
        QCOMPARE(panel->saveLesson(path), QString());
        panel->removeStep(0);
        panel->removeStep(0);
        QCOMPARE(int(panel->lesson().steps.size()), 0);
        QCOMPARE(panel->openLesson(path), QString());
        QCOMPARE(int(panel->lesson().steps.size()), 2);
        QCOMPARE(panel->lesson().steps[1].caption, std::string("Second: ReLU ÷ n."));
        QVERIFY(applyAndWait([&] { panel->goTo(1); }));
        checkSecond();
    }

    // What the window shows comes back at the next start, overrides included (Settings owns
    // both halves); an unreadable saved value takes its default.
    void theSessionPersists() {
        core::RunSpec run;
        run.attention.kind = core::AttentionKind::Sigmoid;
        run.attention.sigmoidBias = -2.0;
        core::AttentionOverride layerWide;
        layerWide.layer = 1;
        layerWide.spec.kind = core::AttentionKind::ReluLen;
        layerWide.spec.lengthExponent = 0.5;
        core::AttentionOverride ablation;
        ablation.layer = 0;
        ablation.head = 1;
        ablation.ablation = core::Ablation::Zero;
        run.overrides = {layerWide, ablation};
        QVERIFY(applyAndWait([&] {
            state_->setModelFolder(tinyModel());
            state_->setRun(run);
            state_->setMode(VariantMode::SameWeights);
        }));
        state_->setLayer(1);
        state_->setHead(-1);
        window_->saveSettings();

        AppState next;
        next.setModelFolder(Settings::string(Settings::Key::ModelFolder));
        QCOMPARE(next.modelFolder(), state_->modelFolder());
        Settings::restoreVariants(next);
        Settings::restoreSelection(next);
        QVERIFY(core::sameVariants(next.run(), run));
        QCOMPARE(next.run().overrides, run.overrides);
        QCOMPARE(next.run().attention.sigmoidBias.value_or(0), -2.0);
        QCOMPARE(next.layer(), 1);
        QCOMPARE(next.head(), -1);
        QCOMPARE(Settings::string(Settings::Key::Text), state_->text());

        QSettings().setValue(
            "run/overrides",
            R"([{"layer": "one"}, {"layer": 0, "head": 0, "ablation": "uniform"}])");
        QSettings().setValue("run/a", 9.0);
        AppState damaged;
        damaged.setModelFolder(tinyModel());
        Settings::restoreVariants(damaged);
        QCOMPARE(damaged.run().overrides.size(), size_t(1));
        QCOMPARE(damaged.run().overrides[0].label(), std::string("0:0=uniform"));
        QCOMPARE(damaged.run().attention.lengthExponent, 2.0);  // clamped to the family's range
        QSettings().clear();
    }

    // `render --lesson` writes every step's views and captions; `render --scene` one scene's.
    void renderLessonWritesEveryStep() {
        QTemporaryDir dir;
        core::Lesson lesson;
        lesson.title = "two steps";
        for (int i = 0; i < 2; ++i) {
            core::Scene s;
            s.model = QFileInfo(tinyModel()).absoluteFilePath().toStdString();
            s.text = i == 0 ? kText.toStdString() : "A second step.";
            s.view = i == 0 ? "attention" : "sparsity";
            s.caption = "caption " + std::to_string(i + 1);
            lesson.steps.push_back(s);
        }
        const QString lessonPath = dir.filePath("two.relulens");
        QVERIFY(core::writeLessonFile(lessonPath.toStdString(), lesson));
        auto [code, output] = runRelulens(
            {"render", "--lesson", lessonPath, "--out", dir.filePath("all"), "--view", "all"});
        QVERIFY2(code == 0, qPrintable(output));
        const QStringList files = QDir(dir.filePath("all")).entryList(QDir::Files, QDir::Name);
        QCOMPARE(files.size(), 2 * (viewNames().size() + 1));
        for (int step = 1; step <= 2; ++step) {
            for (const auto& view : viewNames()) {
                const QString png = dir.filePath(
                    QString("all/step-%1-%2.png").arg(step, 2, 10, QChar('0')).arg(view));
                QImage image(png);
                QVERIFY2(distinctColours(image) > 20, qPrintable(png));
            }
            QFile caption(
                dir.filePath(QString("all/step-%1-caption.txt").arg(step, 2, 10, QChar('0'))));
            QVERIFY(caption.open(QIODevice::ReadOnly));
            QCOMPARE(QString::fromUtf8(caption.readAll()).trimmed(),
                     QString("caption %1").arg(step));
        }
        // by default each step's own view; SVG by --format; existing files need --force
        std::tie(code, output) = runRelulens(
            {"render", "--lesson", lessonPath, "--out", dir.filePath("own"), "--format", "svg"});
        QVERIFY2(code == 0, qPrintable(output));
        QCOMPARE(QDir(dir.filePath("own")).entryList(QDir::Files, QDir::Name),
                 QStringList({"step-01-attention.svg", "step-01-caption.txt", "step-02-caption.txt",
                              "step-02-sparsity.svg"}));
        std::tie(code, output) = runRelulens(
            {"render", "--lesson", lessonPath, "--out", dir.filePath("own"), "--format", "svg"});
        QCOMPARE(code, 1);
        QVERIFY2(output.contains("exists; add --force"), qPrintable(output));
        // a scene, named after its file
        core::Scene one = lesson.steps[0];
        one.view = "heads";
        one.caption.clear();
        QVERIFY(core::writeSceneFile(dir.filePath("one.relulens").toStdString(), one));
        std::tie(code, output) = runRelulens(
            {"render", "--scene", dir.filePath("one.relulens"), "--out", dir.filePath("scene")});
        QVERIFY2(code == 0, qPrintable(output));
        QCOMPARE(QDir(dir.filePath("scene")).entryList(QDir::Files),
                 QStringList({"one-heads.png"}));
        // a scene whose model is missing: a message, nothing written
        one.model = "no-such-model";
        QVERIFY(core::writeSceneFile(dir.filePath("lost.relulens").toStdString(), one));
        std::tie(code, output) = runRelulens(
            {"render", "--scene", dir.filePath("lost.relulens"), "--out", dir.filePath("lost")});
        QCOMPARE(code, 1);
        QVERIFY2(output.contains("'no-such-model' is not among the bundled models"),
                 qPrintable(output));
    }

    // The lessons in resources/lessons open without a note, and every step renders.
    void shippedLessonsRender() {
        const QString lessons = QString(RELULENS_RESOURCES) + "/lessons";
        const QStringList files = QDir(lessons).entryList({"*.relulens"}, QDir::Files, QDir::Name);
        QCOMPARE(files.size(), 3);
        QTemporaryDir dir;
        for (const auto& name : files) {
            auto read = core::readLessonFile((lessons + "/" + name).toStdString());
            QVERIFY2(read, read.error().c_str());
            QVERIFY2(read->notes.empty(), qPrintable(name));
            const int steps = int(read->value.steps.size());
            QVERIFY2(steps >= 5 && steps <= 8, qPrintable(name));
            for (const auto& s : read->value.steps) QVERIFY2(!s.caption.empty(), qPrintable(name));
            const QString out = dir.filePath(QFileInfo(name).completeBaseName());
            auto [code, output] =
                runRelulens({"render", "--lesson", lessons + "/" + name, "--out", out});
            QVERIFY2(code == 0, qPrintable(name + ": " + output));
            QVERIFY2(!output.contains("note:"), qPrintable(name + ": " + output));
            for (int i = 0; i < steps; ++i) {
                const QString png =
                    out + QString("/step-%1-%2.png")
                              .arg(i + 1, 2, 10, QChar('0'))
                              .arg(QString::fromStdString(read->value.steps[size_t(i)].view));
                QVERIFY2(distinctColours(QImage(png)) > 20, qPrintable(png));
            }
        }
    }
};

QTEST_MAIN(TestScenes)
#include "test_scenes.moc"
