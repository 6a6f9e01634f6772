#include "ui/settings.h"

#include <QMainWindow>
#include <QSettings>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/capture_json.h"
#include "core/scene.h"
#include "ui/app_state.h"

namespace relulens::ui {

namespace {

struct Entry {
    Settings::Key key;
    const char* name;
    QVariant fallback;
};

// In the order of Settings::Key: a key without its entry fails to compile (the size) or is
// caught on first use (the order), never read as another key's value.
const Entry kTable[] = {
    {Settings::Key::Text, "input/text", QString()},
    {Settings::Key::ModelFolder, "input/model", QString()},
    {Settings::Key::Attention, "run/attention", QString("softmax")},
    {Settings::Key::FamilyH, "run/h", QString("relu")},
    {Settings::Key::Exponent, "run/a", 1.0},
    {Settings::Key::SigmoidBias, "run/sigmoid_bias", QString("-log n")},
    {Settings::Key::SsmaxSigma, "run/ssmax_sigma", 0.43},
    {Settings::Key::Ffn, "run/ffn", QString("relu")},
    {Settings::Key::Mode, "run/mode", 0},
    {Settings::Key::Layer, "selection/layer", 0},
    {Settings::Key::Head, "selection/head", 0},
    {Settings::Key::WindowGeometry, "window/geometry", QByteArray()},
    {Settings::Key::WindowState, "window/state", QByteArray()},
    {Settings::Key::LastExportDir, "export/dir", QString()},
    {Settings::Key::Overrides, "run/overrides", QString("[]")},
};
static_assert(std::size(kTable) == size_t(Settings::Key::Count),
              "every settings key needs its entry");

const Entry& entry(Settings::Key key) {
    const auto index = size_t(key);
    if (index >= std::size(kTable) || kTable[index].key != key) {
        qFatal("Settings: key %d has no entry in the table (or the table is out of order)",
               int(key));
    }
    return kTable[index];
}

}  // namespace

QVariant Settings::value(Key key) {
    const Entry& e = entry(key);
    return QSettings().value(e.name, e.fallback);
}

void Settings::setValue(Key key, const QVariant& value) {
    QSettings().setValue(entry(key).name, value);
}

void Settings::saveSession(const AppState& state, const QMainWindow& window) {
    setValue(Key::Text, state.text());
    setValue(Key::ModelFolder, state.modelFolder());
    const auto& run = state.run();
    setValue(Key::Attention, QString::fromStdString(run.attention.name()));
    setValue(Key::FamilyH,
             QString::fromStdString(core::familyFunctionName(run.attention.familyFunction)));
    setValue(Key::Exponent, run.attention.lengthExponent);
    setValue(Key::SigmoidBias, run.attention.sigmoidBias ? QVariant(*run.attention.sigmoidBias)
                                                         : QVariant(QString("-log n")));
    setValue(Key::SsmaxSigma, run.attention.ssmaxSigma);
    setValue(Key::Ffn, QString::fromStdString(core::ffnKindName(run.ffn)));
    setValue(Key::Overrides, QString::fromStdString(core::runSpecToJson(run)["overrides"].dump()));
    setValue(Key::Mode, state.mode() == VariantMode::TrainedVariant ? 1 : 0);
    setValue(Key::Layer, state.layer());
    setValue(Key::Head, state.head());
    setValue(Key::WindowGeometry, window.saveGeometry());
    setValue(Key::WindowState, window.saveState());
}

void Settings::restoreVariants(AppState& state) {
    core::RunSpec run;
    if (auto k = core::parseAttentionKind(string(Key::Attention).toStdString()))
        run.attention.kind = *k;
    if (auto h = core::parseFamilyFunction(string(Key::FamilyH).toStdString()))
        run.attention.familyFunction = *h;
    run.attention.lengthExponent = std::clamp(number(Key::Exponent), 0.0, 2.0);
    bool isNumber = false;
    const double bias = value(Key::SigmoidBias).toDouble(&isNumber);
    if (isNumber && std::isfinite(bias)) run.attention.sigmoidBias = std::clamp(bias, -20.0, 20.0);
    const double sigma = number(Key::SsmaxSigma);
    if (std::isfinite(sigma) && sigma > 0) run.attention.ssmaxSigma = std::clamp(sigma, 0.01, 4.0);
    if (auto f = core::parseFfnKind(string(Key::Ffn).toStdString())) run.ffn = *f;
    // The overrides are read as a scene's are: an unreadable one is left out.
    const auto overrides =
        nlohmann::json::parse(string(Key::Overrides).toStdString(), nullptr, false);
    if (!overrides.is_discarded()) {
        auto read = core::sceneFromJson(
            {{"relulens_scene", core::kSceneFormatVersion}, {"run", {{"overrides", overrides}}}});
        if (read) run.overrides = read->value.run.overrides;
    }
    const auto& info = state.modelInfo();
    auto& list = run.overrides;
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const core::AttentionOverride& o) {
                                  return info.nLayers > 0 &&
                                         (o.layer >= info.nLayers || o.head >= info.nHeads);
                              }),
               list.end());
    state.setRun(run);
    state.setMode(integer(Key::Mode) == 1 ? VariantMode::TrainedVariant : VariantMode::SameWeights);
}

void Settings::restoreSelection(AppState& state) {
    state.setLayer(integer(Key::Layer));
    state.setHead(integer(Key::Head));
}

void Settings::restoreWindow(QMainWindow& window) {
    window.restoreGeometry(bytes(Key::WindowGeometry));
    window.restoreState(bytes(Key::WindowState));
}

}  // namespace relulens::ui
