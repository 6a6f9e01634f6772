// `relulens` as a user runs it: inspect on the tiny model for every variant, JSON contents,
// and one-line errors with a non-zero exit for bad input.
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.h"

using nlohmann::json;

namespace {

struct Run {
    int exitCode = -1;
    QString out, err;
};

Run runRelulens(const QStringList& args) {
    QProcess process;
    process.start(QString::fromStdString(relulens::test::binPath("relulens")), args);
    process.waitForFinished(120000);
    return {process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1,
            QString::fromUtf8(process.readAllStandardOutput()),
            QString::fromUtf8(process.readAllStandardError())};
}

QString tinyModel() {
    return QString::fromStdString(relulens::test::dataPath("tiny"));
}

const char* kText = "It is a truth universally acknowledged, that a single man";

}  // namespace

class TestCli : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
private Q_SLOTS:
    void versionAndHelp() {
        auto version = runRelulens({"--version"});
        QCOMPARE(version.exitCode, 0);
        QVERIFY(version.out.startsWith("relulens 0."));
        QVERIFY(version.out.contains("LibTorch"));
        QVERIFY(version.out.contains("librelulens_spm.so"));
        // The licence, the Qt the window runs with, the device and why not CUDA, and every
        // component's licence, one line each.
        QVERIFY(version.out.contains("\nlicence: GPL-3.0-or-later"));
        QVERIFY(version.out.contains(QString("\nQt %1\n").arg(qVersion())));
        QVERIFY(version.out.contains("\ndevice: "));
        for (const char* line :
             {"component: QCustomPlot, GPL-3.0-or-later", "component: LibTorch, BSD-3-Clause",
              "component: SentencePiece, Apache-2.0", "component: Qt 6, LGPL-3.0-only",
              "component: nlohmann-json, MIT"}) {
            QVERIFY2(version.out.contains(line), line);
        }
        auto help = runRelulens({"--help"});
        QCOMPARE(help.exitCode, 0);
        QVERIFY(help.out.contains("inspect"));
        QVERIFY(help.out.contains("--attention"));
    }

    void inspectEveryVariant_data() {
        QTest::addColumn<QStringList>("options");
        QTest::addColumn<QString>("variant");
        QTest::addColumn<bool>("exactZeros");
        QTest::newRow("softmax") << QStringList{"--attention", "softmax"} << "softmax" << false;
        QTest::newRow("relu") << QStringList{"--attention", "relu"} << "relu" << true;
        QTest::newRow("relu_len") << QStringList{"--attention", "relu_len"} << "relu_len" << true;
        QTest::newRow("reluformer")
            << QStringList{"--attention", "reluformer"} << "reluformer" << true;
        for (const char* h : {"relu", "relu2", "gelu", "softplus", "sigmoid"}) {
            const bool exact = QString(h) == "relu" || QString(h) == "relu2";
            QTest::newRow(qPrintable(QString("family-") + h))
                << QStringList{"--attention", "family", "--h", h, "--a", "0.5"} << "family"
                << exact;
        }
        for (const char* later : {"sigmoid", "softpick", "softmax1", "sparsemax", "entmax15",
                                  "ssmax", "stickbreaking"}) {
            const QString name = later;
            const bool exact = name == "softpick" || name == "sparsemax" || name == "entmax15";
            QTest::newRow(later) << QStringList{"--attention", later} << name << exact;
        }
        QTest::newRow("sigmoid-bias")
            << QStringList{"--attention", "sigmoid", "--sigmoid-bias", "-2"} << "sigmoid" << false;
        QTest::newRow("ssmax-sigma")
            << QStringList{"--attention", "ssmax", "--ssmax-sigma", "0.8"} << "ssmax" << false;
        for (const char* ffn : {"gelu", "softmax", "softmax_ln"}) {
            QTest::newRow(qPrintable(QString("ffn-") + ffn))
                << QStringList{"--ffn", ffn} << "softmax" << false;
        }
    }

    void inspectEveryVariant() {
        QFETCH(QStringList, options);
        QFETCH(QString, variant);
        QFETCH(bool, exactZeros);
        const QString out = dir_.filePath(QString("%1.json").arg(QTest::currentDataTag()));
        auto run = runRelulens(QStringList{"inspect", "--model", tinyModel(), "--text", kText,
                                           "--maps", "0:1,1:0", "--json", out} +
                               options);
        QVERIFY2(run.exitCode == 0, qPrintable(run.err));
        QVERIFY(run.out.contains("sparsity"));
        QVERIFY(run.out.contains("next"));
        std::ifstream in(out.toStdString());
        const auto j = json::parse(in);
        QCOMPARE(QString::fromStdString(j["run"]["attention"]["variant"]), variant);
        QCOMPARE(QString::fromStdString(j["model"]["attention"]["variant"]), QString("softmax"));
        QCOMPARE(QString::fromStdString(j["model"]["ffn"]), QString("relu"));
        QCOMPARE(QString::fromStdString(j["run"]["device"]), QString("cpu"));
        const bool trained = variant == "softmax" && !options.contains("--ffn");
        QCOMPARE(j["run"]["trained_with_this_variant"].get<bool>(), trained);
        const auto& tokens = j["tokens"];
        QVERIFY(tokens.size() > 5);
        QCOMPARE(tokens[0]["start"].get<int>(), 0);
        QCOMPARE(tokens.back()["end"].get<size_t>(), std::string(kText).size());
        QCOMPARE(j["layers"].size(), size_t(2));
        for (const auto& layer : j["layers"]) {
            QCOMPARE(layer["sparsity_rule"]["exact_zero"].get<bool>(), exactZeros);
            QCOMPARE(layer["heads"].size(), size_t(2));
            for (const auto& head : layer["heads"]) {
                for (const char* key : {"sparsity", "entropy", "row_mass", "top_ratio"}) {
                    QVERIFY2(head[key].is_number(), key);
                }
                QVERIFY(head["sparsity"].get<double>() >= 0 && head["sparsity"].get<double>() <= 1);
                const auto& sink = head["sink"];
                QVERIFY(sink["first_token_share"].get<double>() >= 0);
                QCOMPARE(
                    sink["sink_head"].get<bool>(),
                    sink["sink_score"].get<double>() > j["run"]["sink_threshold"].get<double>());
            }
            QCOMPARE(layer["residual"]["largest"].size(), size_t(3));
            QVERIFY(layer["residual"]["largest_over_median"].get<double>() >= 1);
            QVERIFY(layer["ffn"]["sparsity"].is_number());
        }
        QCOMPARE(j["predictions"].size(), tokens.size());
        QCOMPARE(j["predictions"][0]["top"].size(), size_t(5));
        QCOMPARE(j["maps"].size(), size_t(2));
        QCOMPARE(j["maps"][0]["layer"].get<int>(), 0);
        QCOMPARE(j["maps"][0]["head"].get<int>(), 1);
        const auto& weights = j["maps"][1]["weights"];
        QCOMPARE(weights.size(), tokens.size());
        for (size_t i = 0; i < weights.size(); ++i) QCOMPARE(weights[i].size(), i + 1);
        QCOMPARE(j["maps"][1]["scores"].size(), tokens.size());
        if (options.contains("--sigmoid-bias")) {
            QCOMPARE(j["run"]["attention"]["bias"].get<double>(), -2.0);
            QCOMPARE(QString::fromStdString(j["run"]["attention"]["label"]),
                     QString("sigmoid(b=-2.00)"));
        } else if (variant == "sigmoid") {
            QCOMPARE(QString::fromStdString(j["run"]["attention"]["bias"]), QString("-log n"));
        }
        if (variant == "ssmax") {
            QCOMPARE(j["run"]["attention"]["sigma"].get<double>(),
                     options.contains("--ssmax-sigma") ? 0.8 : 0.43);
        }
        if (variant == "softmax" || variant == "sparsemax" || variant == "entmax15" ||
            variant == "ssmax") {
            for (const auto& row : weights) {
                double sum = 0;
                for (double w : row) sum += w;
                QVERIFY(std::abs(sum - 1.0) < 1e-5);
            }
        }
    }

    void errorsAreOneLineAndNonZero_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("empty text")
            << QStringList{"inspect", "--model", tinyModel(), "--text", ""} << "the text is empty";
        QTest::newRow("missing folder")
            << QStringList{"inspect", "--model", "/nonexistent/model", "--text", "hi"}
            << "/nonexistent/model: no such model folder";
        QTest::newRow("no text") << QStringList{"inspect", "--model", tinyModel()}
                                 << "exactly one of --text TEXT or --file FILE";
        QTest::newRow("bad ssmax sigma")
            << QStringList{"inspect",     "--model", tinyModel(),     "--text", "hi",
                           "--attention", "ssmax",   "--ssmax-sigma", "-1"}
            << "ssmax scale sigma = -1 is outside (0, 10]";
        QTest::newRow("bad sigmoid bias")
            << QStringList{"inspect",     "--model", tinyModel(),      "--text", "hi",
                           "--attention", "sigmoid", "--sigmoid-bias", "x"}
            << "--sigmoid-bias expects a number, got 'x' (or log-n for b_i = -log n_i)";
        QTest::newRow("bad variant")
            << QStringList{"inspect", "--model", tinyModel(), "--text", "hi", "--attention", "max"}
            << "unknown attention variant 'max'";
        QTest::newRow("bad exponent")
            << QStringList{"inspect",     "--model", tinyModel(), "--text", "hi",
                           "--attention", "family",  "--a",       "3"}
            << "length exponent a = 3 is outside [0, 2]";
        QTest::newRow("bad head") << QStringList{"inspect", "--model", tinyModel(), "--text",
                                                 "hi",      "--maps",  "0:9"}
                                  << "no head 0:9";
        QTest::newRow("bad device")
            << QStringList{"inspect", "--model", tinyModel(), "--text", "hi", "--device", "tpu"}
            << "unknown device 'tpu'";
        QTest::newRow("too long") << QStringList{"inspect", "--model", tinyModel(), "--text",
                                                 QString("ab 1 ").repeated(20000)}
                                  << "can be inspected at once";
        QTest::newRow("override past the last layer")
            << QStringList{"inspect", "--model",    tinyModel(), "--text",
                           "hi",      "--override", "5=relu"}
            << "override 5=relu: the model has layers 0–1";
        QTest::newRow("override of a missing head")
            << QStringList{"inspect", "--model",    tinyModel(), "--text",
                           "hi",      "--override", "1:2=relu"}
            << "override 1:2=relu: the model has heads 0–1";
        QTest::newRow("override with an unknown variant")
            << QStringList{"inspect", "--model", tinyModel(), "--text", "hi", "--override", "1=max"}
            << "--override '1=max': unknown attention variant 'max'";
        QTest::newRow("override without a variant")
            << QStringList{"inspect", "--model", tinyModel(), "--text", "hi", "--override", "1"}
            << "expected LAYER[:HEAD]=VARIANT";
        QTest::newRow("ablation of a whole layer")
            << QStringList{"inspect", "--model", tinyModel(), "--text", "hi", "--ablate", "1"}
            << "an ablation names one head, LAYER:HEAD";
        QTest::newRow("ablation with an unknown mode")
            << QStringList{"inspect", "--model",  tinyModel(), "--text",
                           "hi",      "--ablate", "1:0=mean"}
            << "an ablation is zero (output 0) or uniform";
        QTest::newRow("lens past the text")
            << QStringList{"inspect", "--model", tinyModel(), "--text", "hi", "--lens-at", "40"}
            << "lens position 40 is outside the text's";
        QTest::newRow("unknown option")
            << QStringList{"inspect", "--colour"} << "unknown option --colour";
        QTest::newRow("unknown command") << QStringList{"explain"} << "unknown command 'explain'";
    }

    void errorsAreOneLineAndNonZero() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        auto run = runRelulens(args);
        QVERIFY(run.exitCode != 0);
        QVERIFY2(run.err.contains(message), qPrintable(run.err));
        QCOMPARE(run.err.count('\n'), 1);
    }

    // Overrides and ablations on the command line: the JSON names them in order, measures what
    // they change at every token, and carries the logit lens.
    void overridesAblationsAndTheLensInTheJson() {
        const QString out = dir_.filePath("overrides.json");
        auto run = runRelulens({"inspect", "--model", tinyModel(), "--text", kText, "--override",
                                "1=relu_len", "--override", "0:1=sparsemax", "--ablate",
                                "1:0=uniform", "--lens-at", "2", "--json", out});
        QVERIFY2(run.exitCode == 0, qPrintable(run.err));
        QVERIFY(run.out.contains(
            "override 1=relu_len\noverride 0:1=sparsemax\noverride 1:0=uniform\n"));
        QVERIFY(run.out.contains("NOT the variants it was trained with"));
        QVERIFY(run.out.contains("effect   text loss"));
        QVERIFY(run.out.contains("lens     after"));
        std::ifstream in(out.toStdString());
        const json j = json::parse(in);
        const auto& overrides = j["run"]["overrides"];
        QCOMPARE(overrides.size(), size_t(3));
        QCOMPARE(overrides[0]["layer"].get<int>(), 1);
        QVERIFY(overrides[0]["head"].is_null());
        QCOMPARE(overrides[0]["attention"]["variant"].get<std::string>(), std::string("relu_len"));
        QCOMPARE(overrides[1]["head"].get<int>(), 1);
        QCOMPARE(overrides[2]["ablation"].get<std::string>(), std::string("uniform"));
        const size_t L = j["tokens"].size();
        QCOMPARE(j["effect"]["kl"].size(), L - 1);
        QCOMPARE(j["effect"]["delta_log_prob"].size(), L - 1);
        double meanDelta = 0;
        for (const auto& d : j["effect"]["delta_log_prob"])
            meanDelta += d.get<double>() / double(L - 1);
        // The loss change is minus the mean change in log-probability of the actual next tokens.
        QVERIFY(std::abs((j["effect"]["loss"].get<double>() -
                          j["effect"]["unchanged_loss"].get<double>()) +
                         meanDelta) < 1e-6);
        QCOMPARE(j["lens"]["layers"].size(), size_t(2));
        QCOMPARE(j["lens"]["layers"][0]["next_token_probability"].size(), L - 1);
        QCOMPARE(j["lens"]["top"][0]["position"].get<int>(), 2);
        QCOMPARE(j["lens"]["top"][0]["layers"].size(), size_t(2));

        // Without overrides there is no effect to report.
        auto plain = runRelulens({
            "inspect",
            "--model",
            tinyModel(),
            "--text",
            kText,
            "--json",
            out,
        });
        QVERIFY2(plain.exitCode == 0, qPrintable(plain.err));
        std::ifstream again(out.toStdString());
        const json k = json::parse(again);
        QVERIFY(!k.contains("effect"));
        QCOMPARE(k["run"]["overrides"].size(), size_t(0));
    }

    void corruptSafetensorsIsOneLine() {
        const QString folder = dir_.filePath("corrupt");
        QDir().mkpath(folder);
        for (const char* name : {"config.json", "tokenizer.model"}) {
            QFile::copy(tinyModel() + "/" + name, folder + "/" + name);
        }
        QFile weights(folder + "/model.safetensors");
        QVERIFY(weights.open(QIODevice::WriteOnly));
        weights.write(QByteArray("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13));
        weights.close();
        auto run = runRelulens({"inspect", "--model", folder, "--text", "hi"});
        QVERIFY(run.exitCode != 0);
        QVERIFY2(run.err.contains("model.safetensors: header length 16 runs past the end"),
                 qPrintable(run.err));
        QCOMPARE(run.err.count('\n'), 1);
    }

    void initModelAndTokenizerCommands() {
        const QString tokenizer = dir_.filePath("t.model");
        auto trained = runRelulens({"train-tokenizer", "--corpus",
                                    QString::fromStdString(relulens::test::dataPath("excerpt.txt")),
                                    "--vocab", "320", "--out", tokenizer});
        QVERIFY2(trained.exitCode == 0, qPrintable(trained.err));
        const QString folder = dir_.filePath("fresh");
        auto made = runRelulens({"init-model", "--tokenizer", tokenizer, "--out", folder,
                                 "--attention", "reluformer", "--dtype", "f16"});
        QVERIFY2(made.exitCode == 0, qPrintable(made.err));
        auto again = runRelulens({"init-model", "--tokenizer", tokenizer, "--out", folder});
        QVERIFY(again.exitCode != 0);
        QVERIFY(again.err.contains("--force"));
        auto inspected = runRelulens({"inspect", "--model", folder, "--text", "Elizabeth"});
        QVERIFY2(inspected.exitCode == 0, qPrintable(inspected.err));
        QVERIFY(inspected.out.contains("trained with attention reluformer"));
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
