#include "ui/settings.h"

#include <QSettings>

namespace relulens::ui {

namespace {

struct Entry {
    Settings::Key key;
    const char* name;
    QVariant fallback;
};

const Entry& entry(Settings::Key key) {
    static const Entry table[] = {
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
    };
    for (const auto& e : table) {
        if (e.key == key) return e;
    }
    return table[0];
}

}  // namespace

QVariant Settings::value(Key key) {
    const Entry& e = entry(key);
    return QSettings().value(e.name, e.fallback);
}

void Settings::setValue(Key key, const QVariant& value) { QSettings().setValue(entry(key).name, value); }

}  // namespace relulens::ui
