#include "ui/lesson_panel.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QPushButton>
#include <QVBoxLayout>

#include "ui/main_window.h"
#include "ui/resource_paths.h"
#include "ui/scene_state.h"

namespace relulens::ui {

LessonPanel::LessonPanel(MainWindow* window) : QWidget(window), window_(window) {
    auto* layout = new QVBoxLayout(this);
    title_ = new QLineEdit(this);
    title_->setPlaceholderText("Lesson title");
    connect(title_, &QLineEdit::textEdited, this,
            [this](const QString& t) { lesson_.title = t.toStdString(); });
    list_ = new QListWidget(this);
    list_->setWordWrap(true);
    list_->setDragDropMode(QAbstractItemView::NoDragDrop);
    connect(list_, &QListWidget::itemActivated, this,
            [this](QListWidgetItem* item) { goTo(list_->row(item)); });
    caption_ = new QLabel(this);
    caption_->setWordWrap(true);
    caption_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    status_ = new QLabel(this);
    status_->setWordWrap(true);
    status_->setStyleSheet("color: #a05000");

    auto button = [this](const QString& text, const QString& tip, auto slot) {
        auto* b = new QPushButton(text, this);
        b->setToolTip(tip);
        connect(b, &QPushButton::clicked, this, slot);
        return b;
    };
    previous_ = button("◀ Previous", "Previous step (Page Up)", [this] { step(-1); });
    next_ = button("Next ▶", "Next step (Page Down)", [this] { step(1); });
    auto* stepping = new QHBoxLayout;
    stepping->addWidget(previous_);
    stepping->addWidget(next_);
    auto* editing = new QHBoxLayout;
    editing->addWidget(button("Add current",
                              "Add what the window shows now as a step after the last",
                              [this] { addCurrentScene(); }));
    editing->addWidget(
        button("Caption…", "Edit the selected step's caption", [this] { editCaption(); }));
    editing->addWidget(button("↑", "Move the selected step up", [this] {
        const int row = list_->currentRow();
        if (row > 0) moveStep(row, row - 1);
    }));
    editing->addWidget(button("↓", "Move the selected step down", [this] {
        const int row = list_->currentRow();
        if (row >= 0 && row + 1 < int(lesson_.steps.size())) moveStep(row, row + 1);
    }));
    editing->addWidget(
        button("Remove", "Remove the selected step", [this] { removeStep(list_->currentRow()); }));
    auto* files = new QHBoxLayout;
    files->addWidget(
        button("Open lesson…", "Open a lesson file (.relulens)", [this] { openFromDialog(); }));
    files->addWidget(
        button("Save lesson…", "Save the lesson as one file", [this] { saveFromDialog(); }));

    layout->addWidget(title_);
    layout->addLayout(files);
    layout->addWidget(list_, 1);
    layout->addLayout(stepping);
    layout->addLayout(editing);
    layout->addWidget(caption_);
    layout->addWidget(status_);
    rebuildList();
}

QString LessonPanel::notes() const {
    return notes_.join("\n");
}

QString LessonPanel::openLesson(const QString& path) {
    auto read = core::readLessonFile(path.toStdString());
    if (!read) return QString::fromStdString(read.error());
    dir_ = QFileInfo(path).absolutePath();
    lesson_ = read->value;
    for (auto& s : lesson_.steps) s = sceneFromFile(s, dir_);
    notes_.clear();
    for (const auto& n : read->notes) notes_ << QString::fromStdString(n);
    current_ = -1;
    status_->setText(notes_.isEmpty() ? QString() : "⚠ " + notes_.join("\n⚠ "));
    title_->setText(QString::fromStdString(lesson_.title));
    rebuildList();
    Q_EMIT captionChanged(QString());
    return QString();
}

QString LessonPanel::saveLesson(const QString& path) {
    if (lesson_.steps.empty()) return "the lesson has no steps yet: add the current scene first";
    const QString dir = QFileInfo(path).absolutePath();
    core::Lesson file = lesson_;
    for (auto& s : file.steps) s = sceneForFile(s, dir);
    if (auto s = core::writeLessonFile(path.toStdString(), file); !s)
        return QString::fromStdString(s.error());
    dir_ = dir;
    return QString();
}

void LessonPanel::goTo(int index) {
    if (index < 0 || index >= int(lesson_.steps.size())) return;
    current_ = index;
    const auto& scene = lesson_.steps[size_t(index)];
    const QStringList problems = window_->applyScene(scene);
    status_->setText(problems.isEmpty() ? QString() : "⚠ " + problems.join("\n⚠ "));
    list_->setCurrentRow(index);
    rebuildList();
    Q_EMIT captionChanged(QString::fromStdString(scene.caption));
}

void LessonPanel::step(int delta) {
    if (lesson_.steps.empty()) return;
    const int target =
        current_ < 0 ? (delta > 0 ? 0 : int(lesson_.steps.size()) - 1) : current_ + delta;
    goTo(std::clamp(target, 0, int(lesson_.steps.size()) - 1));
}

void LessonPanel::addCurrentScene(const QString& caption) {
    core::Scene scene = window_->currentScene();
    scene.caption = caption.toStdString();
    lesson_.steps.push_back(scene);
    current_ = int(lesson_.steps.size()) - 1;
    rebuildList();
    list_->setCurrentRow(current_);
}

void LessonPanel::removeStep(int index) {
    if (index < 0 || index >= int(lesson_.steps.size())) return;
    lesson_.steps.erase(lesson_.steps.begin() + index);
    if (current_ >= int(lesson_.steps.size())) current_ = int(lesson_.steps.size()) - 1;
    rebuildList();
}

void LessonPanel::moveStep(int from, int to) {
    const int n = int(lesson_.steps.size());
    if (from < 0 || from >= n || to < 0 || to >= n || from == to) return;
    core::Scene moved = lesson_.steps[size_t(from)];
    lesson_.steps.erase(lesson_.steps.begin() + from);
    lesson_.steps.insert(lesson_.steps.begin() + to, moved);
    if (current_ == from) current_ = to;
    rebuildList();
    list_->setCurrentRow(to);
}

void LessonPanel::setCaption(int index, const QString& caption) {
    if (index < 0 || index >= int(lesson_.steps.size())) return;
    lesson_.steps[size_t(index)].caption = caption.toStdString();
    rebuildList();
    if (index == current_) Q_EMIT captionChanged(caption);
}

void LessonPanel::setTitle(const QString& title) {
    lesson_.title = title.toStdString();
    title_->setText(title);
}

void LessonPanel::rebuildList() {
    const int row = list_->currentRow();
    list_->clear();
    for (size_t i = 0; i < lesson_.steps.size(); ++i) {
        const auto& s = lesson_.steps[i];
        QString caption = QString::fromStdString(s.caption);
        if (caption.isEmpty()) caption = "(no caption)";
        auto* item =
            new QListWidgetItem(QString("%1%2. %3 · %4 — %5")
                                    .arg(int(i) == current_ ? "▶ " : "")
                                    .arg(i + 1)
                                    .arg(QFileInfo(QString::fromStdString(s.model)).fileName(),
                                         QString::fromStdString(s.view), caption),
                                list_);
        item->setToolTip(QString::fromStdString(s.caption));
    }
    if (row >= 0 && row < list_->count()) list_->setCurrentRow(row);
    const int n = int(lesson_.steps.size());
    caption_->setText(current_ >= 0 && current_ < n
                          ? QString("<b>Step %1 of %2.</b> %3")
                                .arg(current_ + 1)
                                .arg(n)
                                .arg(QString::fromStdString(lesson_.steps[size_t(current_)].caption)
                                         .toHtmlEscaped())
                          : QString("%1 steps. Page Down starts the lesson.").arg(n));
    previous_->setEnabled(n > 0 && current_ > 0);
    next_->setEnabled(n > 0 && current_ + 1 < n);
}

void LessonPanel::openFromDialog() {
    const QString path = QFileDialog::getOpenFileName(
        this, "Open lesson", ResourcePaths::resourcesDir() + "/lessons",
        "ReluLens lesson (*.relulens);;All files (*)");
    if (path.isEmpty()) return;
    const QString error = openLesson(path);
    if (!error.isEmpty()) QMessageBox::warning(this, "ReluLens", error);
}

void LessonPanel::saveFromDialog() {
    const QString path =
        QFileDialog::getSaveFileName(this, "Save lesson", dir_, "ReluLens lesson (*.relulens)");
    if (path.isEmpty()) return;
    const QString error = saveLesson(path.endsWith(".relulens") ? path : path + ".relulens");
    if (!error.isEmpty()) QMessageBox::warning(this, "ReluLens", error);
}

void LessonPanel::editCaption() {
    const int row = list_->currentRow();
    if (row < 0) return;
    bool ok = false;
    const QString caption = QInputDialog::getMultiLineText(
        this, "Caption", QString("What should people look at in step %1?").arg(row + 1),
        QString::fromStdString(lesson_.steps[size_t(row)].caption), &ok);
    if (ok) setCaption(row, caption.trimmed());
}

}  // namespace relulens::ui
