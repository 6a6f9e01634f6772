// MainWindow's scenes and lessons: the scene shown, applying one (inputs, then selection and
// zoom once its result arrives), scene files, and the lesson caption shown in presentation mode.
#include <QDockWidget>
#include <QFileInfo>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSignalBlocker>
#include <QStatusBar>

#include "core/scene.h"
#include "ui/activation_controls.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/main_window.h"
#include "ui/scene_state.h"
#include "ui/view_factory.h"

namespace relulens::ui {

core::Scene MainWindow::currentScene() const {
    core::Scene scene = sceneFromState(*state_);
    scene.view = shownViewName_.toStdString();
    if (auto* map = qobject_cast<AttentionMapView*>(view("attention"))) addMapView(scene, *map);
    scene.caption = caption_.toStdString();
    return scene;
}

QStringList MainWindow::applyScene(const core::Scene& scene) {
    // Every input first (one forward pass), then the selection and zoom: now for what the shown
    // result allows, and again once the scene's own result arrives.
    disconnect(pendingScene_);
    bool changed = false;
    const auto watch =
        connect(state_, &AppState::inputChanged, this, [&changed] { changed = true; });
    QStringList notes = applySceneInputs(scene, *state_);
    disconnect(watch);
    if (editor_->toPlainText() != state_->text()) {
        const QSignalBlocker block(editor_);
        editor_->setPlainText(state_->text());
    }
    controls_->reloadModels();
    auto* map = qobject_cast<AttentionMapView*>(view("attention"));
    auto finish = [this, scene, map] {
        applySceneSelection(scene, *state_);
        if (map) applySceneMap(scene, *map);
    };
    finish();
    if (changed)
        pendingScene_ =
            connect(state_, &AppState::resultChanged, this, finish, Qt::SingleShotConnection);
    const QString name = QString::fromStdString(scene.view);
    raiseView(viewNames().contains(name) ? name : QString("attention"));
    setCaption(QString::fromStdString(scene.caption));
    return notes;
}

void MainWindow::raiseView(const QString& name) {
    if (auto* dock = findChild<QDockWidget*>(name + "Dock")) {
        dock->show();
        dock->raise();
        shownViewName_ = name;
    }
}

QString MainWindow::saveSceneFile(const QString& path) const {
    const core::Scene scene = sceneForFile(currentScene(), QFileInfo(path).absolutePath());
    if (auto s = core::writeSceneFile(path.toStdString(), scene); !s)
        return QString::fromStdString(s.error());
    return QString();
}

QString MainWindow::openSceneFile(const QString& path, QStringList* notes) {
    auto read = core::readSceneFile(path.toStdString());
    if (!read) return QString::fromStdString(read.error());
    QStringList all;
    for (const auto& n : read->notes) all << QString::fromStdString(n);
    all += applyScene(sceneFromFile(read->value, QFileInfo(path).absolutePath()));
    if (notes) *notes = all;
    if (!all.isEmpty()) statusBar()->showMessage("⚠ " + all.join(" · "), 15000);
    return QString();
}

QString MainWindow::shownCaption() const {
    return captionOverlay_->isVisible() ? captionOverlay_->text() : QString();
}

void MainWindow::setCaption(const QString& caption) {
    caption_ = caption;
    placeCaption();
}

void MainWindow::placeCaption() {
    captionOverlay_->setText(caption_);
    if (!presentation_ || caption_.isEmpty()) {
        captionOverlay_->hide();
        return;
    }
    QFont font = captionOverlay_->font();
    font.setPointSizeF(baseFontSize_ * 1.8);
    captionOverlay_->setFont(font);
    const int width = std::max(300, int(this->width() * 0.7));
    captionOverlay_->setFixedWidth(width);
    captionOverlay_->adjustSize();
    const int bottom = statusBar()->isVisible() ? statusBar()->geometry().top() : height();
    captionOverlay_->move((this->width() - width) / 2, bottom - captionOverlay_->height() - 16);
    captionOverlay_->show();
    captionOverlay_->raise();
}

}  // namespace relulens::ui
