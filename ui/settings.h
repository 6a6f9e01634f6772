// The one settings owner: a table of keys with defaults and typed getters and setters over
// QSettings, and the session (the state's text, model, variants and selection, and the
// window's geometry and docks) saved and restored in one place. Only main.cpp names the
// organisation and application.
#pragma once
#include <QByteArray>
#include <QString>
#include <QVariant>

class QMainWindow;

namespace relulens::ui {

class AppState;

class Settings {
public:
    enum class Key {
        Text,
        ModelFolder,
        Attention,
        FamilyH,
        Exponent,
        SigmoidBias,
        SsmaxSigma,
        Ffn,
        Mode,
        Layer,
        Head,
        WindowGeometry,
        WindowState,
        LastExportDir,
        Overrides,
        Count
    };
    static QVariant value(Key key);
    static void setValue(Key key, const QVariant& value);
    static QString string(Key key) { return value(key).toString(); }
    static int integer(Key key) { return value(key).toInt(); }
    static double number(Key key) { return value(key).toDouble(); }
    static QByteArray bytes(Key key) { return value(key).toByteArray(); }

    // Everything the next start restores.
    static void saveSession(const AppState& state, const QMainWindow& window);
    // The saved variants (with their overrides) and mode; a value out of range or unreadable
    // takes its default.
    static void restoreVariants(AppState& state);
    static void restoreSelection(AppState& state);
    static void restoreWindow(QMainWindow& window);
};

}  // namespace relulens::ui
