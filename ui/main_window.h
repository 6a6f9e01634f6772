// The main window: builds the text editor, token strip, controls, docks with the views, menus
// and shortcuts, and wires them to the AppState. It computes nothing itself.
#pragma once
#include <QMainWindow>
#include <QVector>

#include "core/scene.h"
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
class LessonPanel;
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

    // What the window shows, as a scene (the model by bundled name or absolute folder).
    core::Scene currentScene() const;
    // Switches everything at once to the scene: model, text, variants, selection, view, zoom.
    // Returns a sentence for each part that could not be applied (a missing model keeps the
    // open one); the rest is applied all the same.
    QStringList applyScene(const core::Scene& scene);
    // File ▸ Save scene / Open scene without dialogs: the error, or empty. Opening puts the
    // notes of what could not be applied in `notes`.
    QString saveSceneFile(const QString& path) const;
    QString openSceneFile(const QString& path, QStringList* notes = nullptr);
    LessonPanel* lessonPanel() const { return lesson_; }
    // The caption shown over the views (presentation mode with a lesson step); empty when none.
    QString shownCaption() const;
    // The view whose dock is in front of its tab group.
    void raiseView(const QString& name);

Q_SIGNALS:
    // After switchModelFolder: error is empty when the window switched to the folder.
    void modelFolderChecked(const QString& folder, const QString& error);

protected:
    void closeEvent(QCloseEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    // The constructor's parts: the text editor over the token strip (the central widget), the
    // views' docks, the status bar and its wiring to the controller, then the menus.
    QWidget* buildTextPanel();
    void buildDocks();
    void buildStatusBar();
    void buildMenus();
    void exportCurrentView();
    void exportAllViews();
    void openModelFolder();
    // The worker could not read the weights (or the user cancelled): back to the shown model.
    void modelFailed(const QString& folder, const QString& message);
    ExportableView* currentView() const;
    void placeCaption();
    void setCaption(const QString& caption);

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
    LessonPanel* lesson_;
    QLabel* captionOverlay_;
    QString caption_;
    bool presentation_ = false;
    QString shownViewName_ = "attention";
    QMetaObject::Connection pendingScene_;  // selection and zoom, once the scene's result arrives
};

}  // namespace relulens::ui
