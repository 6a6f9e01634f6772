// The Lesson panel: an ordered list of scenes with captions. Step through it with Page Down /
// Page Up (also in presentation mode); each step switches everything at once. Steps are added
// from what the window shows, reordered, captioned, and the lesson saved as one file.
#pragma once
#include <QWidget>

#include "core/scene.h"

class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;

namespace relulens::ui {

class MainWindow;

class LessonPanel : public QWidget {
    Q_OBJECT
public:
    explicit LessonPanel(MainWindow* window);

    // Replaces the lesson with the file's; the error, or empty. The notes of steps that could
    // not be read in full are shown in the panel.
    QString openLesson(const QString& path);
    QString saveLesson(const QString& path);
    const core::Lesson& lesson() const { return lesson_; }
    int currentStep() const { return current_; }
    QString notes() const;

    // Shows step `index` (from 0): the window takes its scene and the caption is shown.
    void goTo(int index);
    void step(int delta);
    // Appends what the window shows now, with this caption, as a new step.
    void addCurrentScene(const QString& caption = QString());
    void removeStep(int index);
    void moveStep(int from, int to);
    void setCaption(int index, const QString& caption);
    void setTitle(const QString& title);

Q_SIGNALS:
    // The caption of the step shown (empty when no step is).
    void captionChanged(const QString& caption);

private:
    void rebuildList();
    void openFromDialog();
    void saveFromDialog();
    void editCaption();

    MainWindow* window_;
    core::Lesson lesson_;
    QString dir_;  // where the lesson file lives: model folders relative to it
    int current_ = -1;
    QStringList notes_;
    QLineEdit* title_;
    QListWidget* list_;
    QLabel* caption_;
    QLabel* status_;
    QPushButton* previous_;
    QPushButton* next_;
};

}  // namespace relulens::ui
