// The main window: builds the text editor, token strip, controls, docks with the views, menus
// and shortcuts, and wires them to the AppState. It computes nothing itself.
#pragma once
#include <QMainWindow>
#include <QVector>

#include "ui/map_jobs.h"

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;

namespace relulens::ui {

class AppState;
class ActivationControls;
class ExportableView;
class InferenceController;
class TokenStrip;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    MainWindow(AppState* state, InferenceController* inference, QWidget* parent = nullptr);

    ExportableView* view(const QString& name) const;
    const QVector<ExportableView*>& views() const { return views_; }
    QPlainTextEdit* editor() const { return editor_; }
    TokenStrip* tokenStrip() const { return strip_; }
    ActivationControls* controls() const { return controls_; }
    void saveSettings() const;

    // Loads a text file into the editor; false (with a message shown) on failure.
    bool openTextFile(const QString& path);
    // The same without dialogs: the message, or empty on success. On failure the editor, the
    // open model and the settings are left exactly as they were.
    QString loadTextFile(const QString& path);
    // Checks the folder (config, every tensor's name and shape, the tokenizer, whether it fits
    // in memory) on the map thread, then switches to it; modelFolderChecked says how it went,
    // and with showErrors a failure is also shown in a message box.
    void switchModelFolder(const QString& folder, bool showErrors = false);
    // Larger fonts on every view and the text, and the formula panel shown: for a projector.
    void setPresentationMode(bool on);
    // Help ▸ About: version, LibTorch and Qt, the device in use (and why not CUDA), the licence
    // and every component's licence.
    QString aboutText() const;

Q_SIGNALS:
    // After switchModelFolder: error is empty when the window switched to the folder.
    void modelFolderChecked(const QString& folder, const QString& error);

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void buildMenus();
    void exportCurrentView();
    void exportAllViews();
    void openModelFolder();
    // The worker could not read the weights (or the user cancelled): back to the shown model.
    void modelFailed(const QString& folder, const QString& message);
    ExportableView* currentView() const;

    AppState* state_;
    InferenceController* inference_;
    MapChannel folderCheck_;
    QPlainTextEdit* editor_;
    TokenStrip* strip_;
    ActivationControls* controls_;
    QVector<ExportableView*> views_;
    QLabel* busy_;
    QLabel* timing_;
    QProgressBar* loading_;
    QPushButton* cancelLoad_;
    double baseFontSize_ = 10;
};

}  // namespace relulens::ui
