// The one settings class: a table of keys with defaults, typed getters and setters over
// QSettings. Only main.cpp names the organisation and application.
#pragma once
#include <QByteArray>
#include <QString>
#include <QVariant>

namespace relulens::ui {

class Settings {
public:
    enum class Key { Text, ModelFolder, Attention, FamilyH, Exponent, SigmoidBias, SsmaxSigma, Ffn,
                     Mode, Layer, Head, WindowGeometry, WindowState, LastExportDir };
    static QVariant value(Key key);
    static void setValue(Key key, const QVariant& value);
    static QString string(Key key) { return value(key).toString(); }
    static int integer(Key key) { return value(key).toInt(); }
    static double number(Key key) { return value(key).toDouble(); }
    static QByteArray bytes(Key key) { return value(key).toByteArray(); }
};

}  // namespace relulens::ui
