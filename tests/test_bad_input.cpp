// The bad-input matrix: every case gives its exact message and loses nothing else (the text in
// the editor, the open model and its last result, the user's settings). Then a stress run of
// 2,000 edits and toggles faster than the model can answer.
#include <QtTest>

#include <sys/resource.h>
#include <QPlainTextEdit>
#include <QSettings>
#include <QSignalSpy>
#include <QtEndian>
#include <csignal>
#include <fstream>

#include "core/capture.h"
#include "core/checkpoint.h"
#include "core/safetensors.h"
#include "core/tokenizer.h"
#include "test_support.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/capture_access.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/main_window.h"

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

QString tinyFolder() {
    return QString::fromStdString(relulens::test::dataPath("tiny"));
}

QMap<QString, QVariant> settingsSnapshot() {
    QSettings settings;
    QMap<QString, QVariant> values;
    for (const auto& key : settings.allKeys()) values[key] = settings.value(key);
    return values;
}

double residentMb() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
    }
    return 0;
}

// A copy of the tiny model in dir/name; returns its path.
QString copyTiny(const QTemporaryDir& dir, const QString& name) {
    const QString target = dir.filePath(name);
    QDir().mkpath(target);
    for (const char* file : {"config.json", "model.safetensors", "tokenizer.model"}) {
        QFile::copy(tinyFolder() + "/" + file, target + "/" + file);
    }
    return target;
}

void writeBytes(const QString& path, const QByteArray& bytes) {
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
    file.write(bytes);
}

QByteArray readBytes(const QString& path) {
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

}  // namespace

class TestBadInput : public QObject {
    Q_OBJECT
private:
    AppState* state_ = nullptr;
    InferenceController* inference_ = nullptr;
    MainWindow* window_ = nullptr;
    QTemporaryDir dir_;
    const QString goodText_ = "It is a truth universally acknowledged, that a single man";

    // What a bad input must leave alone.
    struct Snapshot {
        QString text;
        QString folder;
        std::shared_ptr<const core::CaptureResult> result;
        QMap<QString, QVariant> settings;
    };
    Snapshot snapshot() const {
        return {window_->editor()->toPlainText(), state_->modelFolder(), state_->result(),
                settingsSnapshot()};
    }
    bool unchanged(const Snapshot& before, bool sameText = true) const {
        const Snapshot now = snapshot();
        return (!sameText || now.text == before.text) && now.folder == before.folder &&
               now.result == before.result && now.settings == before.settings;
    }
    void waitIdle() {
        QTRY_VERIFY_WITH_TIMEOUT(!inference_->busy(), 60000);
        QTest::qWait(50);
        QTRY_VERIFY_WITH_TIMEOUT(!inference_->busy(), 60000);
    }
    // Types a text into the editor and returns the message the window shows for it.
    QString messageFor(const QString& text) {
        QSignalSpy errors(state_, &AppState::errorChanged);
        window_->editor()->setPlainText(text);
        if (!errors.wait(60000)) return "(no message)";
        waitIdle();
        return state_->error();
    }

private Q_SLOTS:
    void initTestCase() {
        QCoreApplication::setOrganizationName("ReluLensTest");
        QCoreApplication::setApplicationName("test_bad_input");
        QSettings().clear();
        QSettings().setValue("view/pooling", "max");  // something of the user's to keep
        state_ = new AppState;
        inference_ = new InferenceController(state_);
        state_->setModelFolder(tinyFolder());
        window_ = new MainWindow(state_, inference_);
        window_->resize(1200, 800);
        window_->show();
        QSignalSpy results(state_, &AppState::resultChanged);
        window_->editor()->setPlainText(goodText_);
        QVERIFY(results.wait(30000));
        waitIdle();
        QVERIFY(state_->result());
        QVERIFY(dir_.isValid());
    }

    void cleanupTestCase() {
        delete window_;
        delete inference_;
        delete state_;
    }

    // ---- text ----------------------------------------------------------------------------

    void emptyText() {
        const auto before = snapshot();
        QCOMPARE(messageFor(""), QString("the text is empty: type or paste something to inspect"));
        QVERIFY(unchanged(before, false));
        QCOMPARE(window_->editor()->toPlainText(), QString());  // as typed
    }

    void whitespaceOnly() {
        const auto before = snapshot();
        QCOMPARE(messageFor("  \n\t  \n"),
                 QString("the text is only whitespace: type or paste something to inspect"));
        QVERIFY(unchanged(before, false));
        QCOMPARE(window_->editor()->toPlainText(), QString("  \n\t  \n"));
    }

    void fiveMegabyteText() {
        const auto before = snapshot();
        QString text;
        while (text.size() < 5 * 1024 * 1024) text += goodText_ + "\n";
        auto tokenizer = core::Tokenizer::load(relulens::test::dataPath("tiny/tokenizer.model"));
        QVERIFY(tokenizer.ok());
        const auto count = tokenizer->encode(text.toStdString()).value().size();
        QCOMPARE(messageFor(text),
                 QString("the text has %1 tokens; at most 16384 can be inspected at once: shorten "
                         "it or inspect an excerpt")
                     .arg(count));
        QVERIFY(unchanged(before, false));
        QCOMPARE(window_->editor()->toPlainText().size(), text.size());
    }

    void missingAndOversizedTextFiles() {
        window_->editor()->setPlainText(goodText_);
        waitIdle();
        const auto before = snapshot();
        const QString missing = dir_.filePath("no-such-file.txt");
        QCOMPARE(window_->loadTextFile(missing),
                 missing + ": cannot open (No such file or directory)");
        QVERIFY(unchanged(before));
        const QString large = dir_.filePath("large.txt");
        QByteArray lines;
        while (lines.size() < 5 * 1024 * 1024 + 1)
            lines += "It is a truth universally acknowledged.\n";
        writeBytes(large, lines.left(5 * 1024 * 1024 + 1));
        QCOMPARE(window_->loadTextFile(large),
                 large + " is larger than 5 MB; open a shorter excerpt");
        QVERIFY(unchanged(before));
        // exactly 5 MB is opened
        writeBytes(large, lines.left(5 * 1024 * 1024));
        QCOMPARE(window_->loadTextFile(large), QString());
        QCOMPARE(window_->editor()->toPlainText().size(), 5 * 1024 * 1024);
        waitIdle();
    }

    void invalidUtf8File() {
        window_->editor()->setPlainText(goodText_);
        QSignalSpy results(state_, &AppState::resultChanged);
        QVERIFY(results.wait(30000));
        waitIdle();
        const auto before = snapshot();
        const QString path = dir_.filePath("latin1.txt");
        writeBytes(path, QByteArray("caf\xe9 au lait", 12));  // Latin-1 é
        QCOMPARE(window_->loadTextFile(path),
                 path + " is not UTF-8 text (byte 3); convert it to UTF-8 first");
        QVERIFY(unchanged(before));
        // and the engine refuses it the same way (the command line reads files as bytes)
        auto model = core::loadModelFolder(tinyFolder().toStdString());
        QVERIFY(model.ok());
        auto r = core::capture(*model->model, model->tokenizer, "caf\xe9", core::CaptureRequest{});
        QVERIFY(!r.ok());
        QCOMPARE(QString::fromStdString(r.error()),
                 QString("the text is not valid UTF-8 (byte 3): convert it to UTF-8 first"));
        // overlong forms and surrogates are not UTF-8 either
        QCOMPARE(core::firstInvalidUtf8("ab\xc0\xaf"), int64_t(2));
        QCOMPARE(core::firstInvalidUtf8("\xed\xa0\x80"), int64_t(0));
        QCOMPARE(core::firstInvalidUtf8("caf\xc3\xa9 \xf0\x9f\x99\x82"), int64_t(-1));
    }

    void nulAndControlCharactersAreInspected() {
        // Not an error: each control character is a token of its own, NUL included, and the
        // tokens still tile the text byte for byte.
        // (no \r: the editor itself turns \r\n into \n)
        const QString text = QString("a") + QChar(0) + "b\x01\x07" + "c\x1b[31m\n\t" + QChar(0x7f);
        QSignalSpy results(state_, &AppState::resultChanged);
        window_->editor()->setPlainText(text);
        QVERIFY(results.wait(30000));
        waitIdle();
        QCOMPARE(state_->error(), QString());
        const auto& tokens = state_->result()->tokens;
        QCOMPARE(tokens.back().end, size_t(text.toUtf8().size()));
        for (size_t i = 1; i < tokens.size(); ++i) QCOMPARE(tokens[i].start, tokens[i - 1].end);
        QCOMPARE(window_->editor()->toPlainText(), text);
        // every view draws this text: a figure, not a blank or single-colour page (those have a
        // handful of colours; the fewest a drawn view here has is in the dozens)
        for (auto* view : window_->views()) {
            const QImage image = view->renderImage(1.0);
            QSet<QRgb> colours;
            for (int y = 0; y < image.height(); y += 3) {
                for (int x = 0; x < image.width(); x += 3) colours.insert(image.pixel(x, y));
            }
            QVERIFY2(
                colours.size() > 20,
                qPrintable(QString("%1: %2 colours").arg(view->viewName()).arg(colours.size())));
        }
    }

    // ---- model folders -------------------------------------------------------------------

    void badModelFolders_data() {
        QTest::addColumn<QString>("damage");
        QTest::newRow("missing file") << "missing";
        QTest::newRow("truncated header") << "truncated";
        QTest::newRow("oversized header") << "oversized";
        QTest::newRow("wrong dtype") << "dtype";
        QTest::newRow("mismatched shapes") << "shapes";
        QTest::newRow("NaN weights") << "nan";
        QTest::newRow("absurd sizes") << "absurd";
        QTest::newRow("tokenizer vocabulary") << "tokenizer";
    }

    void badModelFolders() {
        QFETCH(QString, damage);
        window_->editor()->setPlainText(goodText_);
        waitIdle();
        const auto before = snapshot();
        const QString folder = copyTiny(dir_, damage);
        const QString weights = folder + "/model.safetensors";
        QString expected;
        if (damage == "missing") {
            QFile::remove(weights);
            expected = weights + ": missing";
        } else if (damage == "truncated") {
            const QByteArray all = readBytes(weights);
            writeBytes(weights, all.left(18));  // the length field and 10 bytes of header
            const quint64 length = qFromLittleEndian<quint64>(all.constData());
            expected = QString("%1: header length %2 runs past the end of the 18-byte file")
                           .arg(weights)
                           .arg(length);
        } else if (damage == "oversized") {
            QByteArray all = readBytes(weights);
            const quint64 huge = quint64(1) << 40;
            qToLittleEndian<quint64>(huge, all.data());
            writeBytes(weights, all);
            expected = QString("%1: header length %2 runs past the end of the %3-byte file")
                           .arg(weights)
                           .arg(huge)
                           .arg(all.size());
        } else if (damage == "dtype") {
            QByteArray all = readBytes(weights);
            const int at = all.indexOf("\"F32\"");
            QVERIFY(at > 0);
            all.replace(at, 5, "\"I64\"");
            writeBytes(weights, all);
            // the tensor whose dtype was changed is the one named before it in the header
            const int nameEnd = all.lastIndexOf("\":{", at);
            const int nameBegin = all.lastIndexOf('"', nameEnd - 1) + 1;
            const QString name = QString::fromUtf8(all.mid(nameBegin, nameEnd - nameBegin));
            expected = QString("%1: tensor '%2' has dtype I64; ReluLens reads F32, F16 and BF16")
                           .arg(weights, name);
        } else if (damage == "shapes") {
            QByteArray config = readBytes(folder + "/config.json");
            config.replace("\"d_ff\": 64", "\"d_ff\": 32");
            writeBytes(folder + "/config.json", config);
            expected = weights + ": tensor 'layers.0.ffn.w1' has shape 64×32, config says 32×32";
        } else if (damage == "nan") {
            auto file = core::readSafetensors(weights.toStdString());
            QVERIFY(file.ok());
            file->tensors["ln_f.weight"][3] = std::numeric_limits<float>::quiet_NaN();
            QVERIFY(
                core::writeSafetensors(weights.toStdString(), file->tensors, core::StorageType::F32)
                    .ok());
            expected = weights + ": tensor 'ln_f.weight' holds 1 NaN or infinite value(s)";
        } else if (damage == "absurd") {
            QByteArray config = readBytes(folder + "/config.json");
            config.replace("\"d_model\": 32", "\"d_model\": 1000000000");
            writeBytes(folder + "/config.json", config);
            expected = folder + "/config.json: config: d_model = 1000000000 is outside [2, 16384]";
        } else if (damage == "tokenizer") {
            QFile::remove(folder + "/tokenizer.model");
            QVERIFY(QFile::copy(QString(RELULENS_RESOURCES) + "/models/softmax/tokenizer.model",
                                folder + "/tokenizer.model"));
            expected =
                folder + "/tokenizer.model: the tokenizer has 4096 pieces, config.json says 512";
        }
        const int computesBefore = inference_->computeCount();
        QCOMPARE(switchFolder(window_, folder), expected);
        waitIdle();
        QVERIFY(unchanged(before));
        QCOMPARE(state_->modelFolder(), tinyFolder());
        // Refused by the check, before the worker reads any weight: no pass ran with it.
        QCOMPARE(inference_->computeCount(), computesBefore);
    }

    // ---- exports -------------------------------------------------------------------------

    void exportToAPathThatCannotBeWritten() {
        const auto before = snapshot();
        const QString blocker = dir_.filePath("a-file");
        writeBytes(blocker, "not a folder");
        const QString path = blocker + "/map.png";  // its parent is a file
        QString error;
        QVERIFY(!window_->view("attention")->exportTo(path, 1.0, &error));
        QVERIFY2(error.startsWith(path + ": cannot write ("), qPrintable(error));
        QVERIFY(unchanged(before));
        QCOMPARE(readBytes(blocker), QByteArray("not a folder"));
    }

    void exportOntoAFullDiskKeepsTheOldFile() {
        const auto before = snapshot();
        const QString path = dir_.filePath("map.png");
        writeBytes(path, "the earlier export");
        // A full disk for this process: writes past 4 KB fail (EFBIG) instead of raising SIGXFSZ.
        std::signal(SIGXFSZ, SIG_IGN);
        rlimit old{};
        getrlimit(RLIMIT_FSIZE, &old);
        rlimit tiny = old;
        tiny.rlim_cur = 4096;
        QCOMPARE(setrlimit(RLIMIT_FSIZE, &tiny), 0);
        QString error;
        const bool written = window_->view("attention")->exportTo(path, 2.0, &error);
        setrlimit(RLIMIT_FSIZE, &old);
        QVERIFY(!written);
        QVERIFY2(error.startsWith(path + ": writing failed (") &&
                     error.endsWith("); any earlier file is unchanged"),
                 qPrintable(error));
        QCOMPARE(readBytes(path), QByteArray("the earlier export"));
        QVERIFY(unchanged(before));
        QCOMPARE(QDir(dir_.path()).entryList({"map.png*"}, QDir::Files | QDir::Hidden).size(), 1);
    }

    // ---- stress --------------------------------------------------------------------------

    void twoThousandEditsAndToggles() {
        window_->editor()->setPlainText(goodText_);
        waitIdle();
        double residentAfterWarmUp = 0;
        const QStringList words = {"truth",         "fortune",   "wife",
                                   "neighbourhood", "daughters", "ball"};
        QString text = goodText_;
        for (int i = 0; i < 2000; ++i) {
            if (i % 3 == 2) {
                state_->toggleSoftmaxRelu();
            } else {
                text += " " + words[i % words.size()];
                if (text.size() > 600) text = goodText_;
                window_->editor()->setPlainText(text);
            }
            // events flow, but far faster than the model answers
            if (i % 10 == 0) QCoreApplication::processEvents();
            if (i == 500) residentAfterWarmUp = residentMb();
        }
        QTRY_VERIFY_WITH_TIMEOUT(
            !inference_->busy() && state_->result() &&
                state_->result()->tokens.back().end == size_t(text.toUtf8().size()),
            60000);
        waitIdle();
        // The result and the view belong to the final request: its text and its activation.
        const auto result = state_->result();
        QCOMPARE(QString::fromStdString(result->run.attention.label()),
                 QString::fromStdString(state_->run().attention.label()));
        std::string rebuilt;
        for (const auto& t : result->tokens)
            rebuilt += text.toStdString().substr(t.start, t.end - t.start);
        QCOMPARE(QString::fromStdString(rebuilt), text);
        auto* map = static_cast<AttentionMapView*>(window_->view("attention"));
        const int last = int(result->tokens.size()) - 1;
        InferenceRequest request;
        request.folder = tinyFolder();
        request.text = text.toStdString();
        request.capture = InferenceController::captureRequestFor(*state_);
        const auto fresh = InferenceController::computeNow(request);
        QVERIFY(fresh.result);
        const double expected =
            fresh.result->maps->weightAt(state_->layer(), state_->head(), last, 0);
        QVERIFY(map->tooltipAt(last, 0).contains(QString("weight %1").arg(expected, 0, 'g', 6)));
        // 1,333 edits and 667 toggles reach the controller in 200 bursts (events are processed
        // every 10th): a forward pass per change would be 2,000, one per burst 200.
        QVERIFY2(inference_->computeCount() < 100,
                 qPrintable(QString("%1 forward passes: bursts must coalesce")
                                .arg(inference_->computeCount())));
        const double growth = residentMb() - residentAfterWarmUp;
#ifdef RELULENS_SANITIZED
        // AddressSanitizer keeps freed memory in quarantine (256 MB by default) to catch use
        // after free; LeakSanitizer checks for leaks in that build.
        const double allowedGrowth = 100 + 256;
#else
        const double allowedGrowth = 100;
#endif
        QVERIFY2(growth < allowedGrowth,
                 qPrintable(QString("resident memory grew by %1 MB").arg(growth)));
        qInfo(
            "%d computes for 2,000 edits and toggles; resident memory %+.1f MB after the first 500",
            inference_->computeCount(), growth);
    }
};

QTEST_MAIN(TestBadInput)
#include "test_bad_input.moc"
