// The SentencePiece tokenizer through its module: round trips, byte offsets, known ids.
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/tokenizer.h"
#include "test_support.h"

using namespace relulens::core;

namespace {

// The text a token stands for: the piece with "▁" as a space, or one byte for "<0xAB>".
std::string surface(const Token& t, bool first) {
    if (t.piece.size() == 6 && t.piece.rfind("<0x", 0) == 0 && t.piece.back() == '>') {
        return std::string(1, char(std::stoi(t.piece.substr(3, 2), nullptr, 16)));
    }
    std::string out;
    const std::string mark = "\xE2\x96\x81";  // ▁
    for (size_t i = 0; i < t.piece.size();) {
        if (t.piece.compare(i, mark.size(), mark) == 0) {
            out += ' ';
            i += mark.size();
        } else {
            out += t.piece[i++];
        }
    }
    // SentencePiece adds a "▁" before the first word that the text itself does not hold.
    if (first && !out.empty() && out[0] == ' ' && t.start == 0 && t.end == out.size() - 1) {
        out.erase(0, 1);
    }
    return out;
}

}  // namespace

class TestTokenizer : public QObject {
    Q_OBJECT
    Tokenizer tokenizer_;
private Q_SLOTS:
    void initTestCase() {
        auto t = Tokenizer::load(relulens::test::dataPath("tiny/tokenizer.model"));
        QVERIFY2(t.ok(), t.ok() ? "" : t.error().c_str());
        tokenizer_ = *t;
        QCOMPARE(tokenizer_.vocabSize(), int64_t(512));
    }

    void roundTripAndOffsets_data() {
        QTest::addColumn<QString>("text");
        QTest::newRow("ascii") << QString("It is a truth universally acknowledged.");
        QTest::newRow("accents") << QString("Café, naïve élan — Mr. Darcy's fiancée!");
        QTest::newRow("cjk") << QString("東京で Elizabeth に会った");
        QTest::newRow("emoji") << QString("Pride 🙂 and prejudice 👍🏽.");
        QTest::newRow("whitespace") << QString("two  spaces\tand a\nnewline");
    }

    void roundTripAndOffsets() {
        QFETCH(QString, text);
        const std::string utf8 = text.toStdString();
        const auto tokens = tokenizer_.encode(utf8).value();
        QVERIFY(!tokens.empty());
        std::vector<int64_t> ids;
        size_t cursor = 0;
        for (size_t i = 0; i < tokens.size(); ++i) {
            const auto& t = tokens[i];
            ids.push_back(t.id);
            QVERIFY(t.id >= 0 && t.id < tokenizer_.vocabSize());
            QCOMPARE(t.start, cursor);  // spans tile the text, in order
            QVERIFY(t.end >= t.start && t.end <= utf8.size());
            QCOMPARE(QByteArray::fromStdString(utf8.substr(t.start, t.end - t.start)),
                     QByteArray::fromStdString(surface(t, i == 0)));
            cursor = t.end;
        }
        QCOMPARE(cursor, utf8.size());
        QCOMPARE(QString::fromStdString(tokenizer_.decode(ids)), text);
    }

    void malformedUtf8() {
        // Each malformed byte becomes U+FFFD: three byte pieces for one byte of the text.
        const std::string text = "ok \xff\xfe end\xc3";
        const auto tokens = tokenizer_.encode(text).value();
        size_t cursor = 0, specialPieces = 0;
        for (const auto& t : tokens) {
            QCOMPARE(t.start, cursor);  // spans still tile the text, in order
            QVERIFY(t.end >= t.start && t.end <= text.size());
            cursor = t.end;
            specialPieces += tokenizer_.isSpecial(t.id) ? 1 : 0;
        }
        QCOMPARE(cursor, text.size());
        QCOMPARE(specialPieces, size_t(9));
    }

    void knownIdsFromSpmEncode() {
        // tiny_reference.json holds the ids SentencePiece's own spm_encode gave for its text.
        std::ifstream in(relulens::test::dataPath("tiny_reference.json"));
        QVERIFY(in.good());
        const auto reference = nlohmann::json::parse(in);
        const auto tokens = tokenizer_.encode(reference["text"].get<std::string>()).value();
        const auto expected = reference["ids"].get<std::vector<int64_t>>();
        QCOMPARE(tokens.size(), expected.size());
        for (size_t i = 0; i < tokens.size(); ++i) QCOMPARE(tokens[i].id, expected[i]);
    }

    void pieces() {
        QCOMPARE(QString::fromStdString(tokenizer_.piece(0)), QString("<unk>"));
        QCOMPARE(QString::fromStdString(tokenizer_.piece(3)), QString("<0x00>"));
    }

    void piecesReadAsText() {
        // byte pieces are ids 3 + byte: a newline, a tab, a lone UTF-8 lead byte, a control byte
        QCOMPARE(QString::fromStdString(tokenizer_.readable(3 + 0x0A)), QString("↵"));
        QCOMPARE(QString::fromStdString(tokenizer_.readable(3 + 0x09)), QString("⇥"));
        QCOMPARE(QString::fromStdString(tokenizer_.readable(3 + 0xE2)), QString("byte 0xE2"));
        QCOMPARE(QString::fromStdString(tokenizer_.readable(3 + 0x01)), QString("byte 0x01"));
        QCOMPARE(QString::fromStdString(tokenizer_.readable(1)), QString("<s>"));
        const int64_t the = tokenizer_.pieceId("▁the");
        QVERIFY(the > 258);
        QCOMPARE(QString::fromStdString(tokenizer_.readable(the)), QString("▁the"));
        // encode fills each token's readable form
        const auto tokens = tokenizer_.encode("a\nb").value();
        QVERIFY(std::any_of(tokens.begin(), tokens.end(),
                            [](const Token& t) { return t.readable == "↵"; }));
    }

    void badModelFileIsAnError() {
        auto missing = Tokenizer::load("/nonexistent/tokenizer.model");
        QVERIFY(!missing.ok());
        QVERIFY(QString::fromStdString(missing.error()).contains("no such file"));
        QTemporaryFile junk;
        QVERIFY(junk.open());
        junk.write("this is not a protobuf model");
        junk.close();
        auto bad = Tokenizer::load(junk.fileName().toStdString());
        QVERIFY(!bad.ok());
        QVERIFY(QString::fromStdString(bad.error()).contains("not a SentencePiece model"));
    }

    void trainsANewModel() {
        QTemporaryDir dir;
        const std::string out = dir.filePath("small.model").toStdString();
        TokenizerTrainOptions options;
        options.inputs = {relulens::test::dataPath("excerpt.txt")};
        options.outputModel = out;
        options.vocabSize = 400;
        auto status = Tokenizer::train(options);
        QVERIFY2(status.ok(), status.error().c_str());
        auto trained = Tokenizer::load(out);
        QVERIFY(trained.ok());
        QCOMPARE(trained->vocabSize(), int64_t(400));
        const std::string text = "Mr. Bennet was so odd a mixture of quick parts";
        std::vector<int64_t> ids;
        const auto tokens = trained->encode(text).value();
        for (const auto& t : tokens) ids.push_back(t.id);
        QCOMPARE(trained->decode(ids), text);
    }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
