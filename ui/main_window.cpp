#include "ui/main_window.h"

#include "core/about.h"
#include "core/device.h"
#include "core/model_folder.h"
#include "core/text_file.h"
#include "core/tokenizer.h"

#include <torch/version.h>

#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QMap>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSplitter>
#include <QStatusBar>
#include <QTextCursor>
#include <QToolBar>
#include <QVBoxLayout>

#include "ui/activation_controls.h"
#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/explanation_panel.h"
#include "ui/exportable_view.h"
#include "ui/inference_worker.h"
#include "ui/lesson_panel.h"
#include "ui/model_catalog.h"
#include "ui/resource_paths.h"
#include "ui/scene_state.h"
#include "ui/settings.h"
#include "ui/token_strip.h"
#include "ui/token_text.h"
#include "ui/view_factory.h"

namespace relulens::ui {

MainWindow::MainWindow(AppState* state, InferenceController* inference, QWidget* parent)
    : QMainWindow(parent), state_(state), inference_(inference) {
    setWindowTitle("ReluLens");
    setAcceptDrops(true);
    setCentralWidget(buildTextPanel());
    controls_ = new ActivationControls(state_, this);
    auto* toolbar = addToolBar("Activation");
    toolbar->setObjectName("activationToolbar");
    toolbar->addWidget(controls_);
    connect(controls_, &ActivationControls::openModelFolderRequested, this,
            &MainWindow::openModelFolder);

    buildDocks();
    buildStatusBar();
    baseFontSize_ = QApplication::font().pointSizeF();
    buildMenus();
    Settings::restoreWindow(*this);
}

QWidget* MainWindow::buildTextPanel() {
    editor_ = new QPlainTextEdit(this);
    editor_->setPlaceholderText("Type or paste text, open a .txt file, or drop one here.");
    editor_->setPlainText(state_->text());
    strip_ = new TokenStrip(state_, this);
    auto* stripScroll = new QScrollArea(this);
    stripScroll->setWidget(strip_);
    stripScroll->setWidgetResizable(true);
    auto* stripPanel = new QWidget(this);
    auto* stripLayout = new QVBoxLayout(stripPanel);
    stripLayout->setContentsMargins(0, 0, 0, 0);
    auto* colouring = new QComboBox(stripPanel);
    colouring->addItems({"colour tokens by: sparsity of the selected head",
                         "colour tokens by: entropy of the selected head",
                         "colour tokens by: activation of the selected memory slot",
                         "colour tokens by: effect of the overrides (KL on the next token)",
                         "no colour"});
    connect(colouring, qOverload<int>(&QComboBox::currentIndexChanged), this, [this](int index) {
        const TokenStrip::Colouring modes[] = {
            TokenStrip::Colouring::Sparsity, TokenStrip::Colouring::Entropy,
            TokenStrip::Colouring::Slot, TokenStrip::Colouring::Effect,
            TokenStrip::Colouring::None};
        strip_->setColouring(modes[index]);
    });
    stripLayout->addWidget(colouring, 0, Qt::AlignLeft);
    stripLayout->addWidget(stripScroll, 1);
    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(editor_);
    splitter->addWidget(stripPanel);
    splitter->setStretchFactor(0, 2);
    splitter->setStretchFactor(1, 1);

    connect(editor_, &QPlainTextEdit::textChanged, this,
            [this] { state_->setText(editor_->toPlainText()); });
    connect(editor_, &QPlainTextEdit::selectionChanged, this, [this] {
        auto result = state_->result();
        const QTextCursor cursor = editor_->textCursor();
        if (!result || !cursor.hasSelection()) return;
        state_->setQueryToken(
            tokenAtTextPosition(*result, editor_->toPlainText(), cursor.selectionStart()));
    });
    return splitter;
}

void MainWindow::buildDocks() {
    // Maps on the right (tabbed: attention map, head grid, compare); statistics at the bottom
    // (tabbed: sparsity, memory slots, diagnostics, sinks, effect, lens) with the predictions
    // beside them.
    QMap<QString, QDockWidget*> docks;
    for (const QString& name : viewNames()) {
        auto* view = createView(name, state_, this);
        auto* dock = new QDockWidget(view->title(), this);
        dock->setObjectName(name + "Dock");
        dock->setWidget(view);
        const bool right = name == "attention" || name == "heads" || name == "compare";
        addDockWidget(right ? Qt::RightDockWidgetArea : Qt::BottomDockWidgetArea, dock);
        // The view a saved scene names: the one most recently brought to the front.
        connect(dock, &QDockWidget::visibilityChanged, this, [this, name](bool visible) {
            if (visible) shownViewName_ = name;
        });
        docks[name] = dock;
        views_.push_back(view);
    }
    auto* explanation = new QDockWidget("Formula", this);
    explanation->setObjectName("formulaDock");
    explanation->setWidget(new ExplanationPanel(state_, this));
    addDockWidget(Qt::LeftDockWidgetArea, explanation);
    explanation->hide();
    lesson_ = new LessonPanel(this);
    auto* lessonDock = new QDockWidget("Lesson", this);
    lessonDock->setObjectName("lessonDock");
    lessonDock->setWidget(lesson_);
    addDockWidget(Qt::LeftDockWidgetArea, lessonDock);
    lessonDock->hide();
    captionOverlay_ = new QLabel(this);
    captionOverlay_->setWordWrap(true);
    captionOverlay_->setAlignment(Qt::AlignCenter);
    captionOverlay_->setAttribute(Qt::WA_TransparentForMouseEvents);
    captionOverlay_->setStyleSheet(
        "background: rgba(20, 20, 30, 215); color: white; padding: 14px; border-radius: 8px;");
    captionOverlay_->hide();
    connect(lesson_, &LessonPanel::captionChanged, this, &MainWindow::setCaption);
    tabifyDockWidget(docks["attention"], docks["heads"]);
    tabifyDockWidget(docks["attention"], docks["compare"]);
    tabifyDockWidget(docks["sparsity"], docks["memory"]);
    tabifyDockWidget(docks["sparsity"], docks["diagnostics"]);
    tabifyDockWidget(docks["sparsity"], docks["sinks"]);
    tabifyDockWidget(docks["sparsity"], docks["effect"]);
    tabifyDockWidget(docks["sparsity"], docks["lens"]);
    // The lens is computed only while its tab is the one shown (or its dock floats open).
    connect(docks["lens"], &QDockWidget::visibilityChanged, state_, &AppState::setLensWanted);
    docks["attention"]->raise();
    docks["sparsity"]->raise();
    QDockWidget* attentionDock = docks["attention"];
    QList<QDockWidget*> bottom{docks["sparsity"]};
    // The attention map gets most of the window; the text keeps a readable column.
    resize(1500, 1000);
    if (attentionDock) resizeDocks({attentionDock}, {850}, Qt::Horizontal);
    if (!bottom.isEmpty()) resizeDocks({bottom.first()}, {380}, Qt::Vertical);
}

void MainWindow::buildStatusBar() {
    busy_ = new QLabel(this);
    timing_ = new QLabel("no result yet", this);
    loading_ = new QProgressBar(this);
    loading_->setRange(0, 100);
    loading_->setMaximumWidth(260);
    loading_->hide();
    cancelLoad_ = new QPushButton("Cancel", this);
    cancelLoad_->setToolTip("Stop loading this model and keep the one shown");
    cancelLoad_->hide();
    statusBar()->addWidget(busy_);
    statusBar()->addWidget(loading_);
    statusBar()->addWidget(cancelLoad_);
    statusBar()->addPermanentWidget(timing_);
    connect(cancelLoad_, &QPushButton::clicked, inference_, &InferenceController::cancel);
    connect(inference_, &InferenceController::loadProgress, this,
            [this](const QString& folder, double fraction) {
                loading_->setFormat(QString("loading %1: %p %").arg(QFileInfo(folder).fileName()));
                loading_->setValue(int(fraction * 100));
                loading_->setVisible(fraction < 1.0);
                cancelLoad_->setVisible(fraction < 1.0);
            });
    connect(inference_, &InferenceController::modelFailed, this, &MainWindow::modelFailed);
    connect(inference_, &InferenceController::busyChanged, this,
            [this](bool busy) { busy_->setText(busy ? "⏳ computing…" : QString()); });
    connect(
        inference_, &InferenceController::computed, this, [this](double ms, const QString& device) {
            auto result = state_->result();
            const int tokens = result ? int(result->tokens.size()) : 0;
            QString text =
                ms > 0
                    ? QString("%1 tokens · %2 ms on %3").arg(tokens).arg(ms, 0, 'f', 1).arg(device)
                    : QString("%1 tokens · a recent result, shown again").arg(tokens);
            if (result && result->reusedLayers > 0 && ms > 0) {
                // A change higher in the model: the layers below it came from the result before.
                text += result->reusedLayers == 1
                            ? QString(" · layer 0 reused")
                            : QString(" · layers 0–%1 reused").arg(result->reusedLayers - 1);
            }
            if (result && result->effect && !result->effect->kl.empty()) {
                // The text's own loss (mean NLL of its next tokens) without and with the overrides.
                text += QString(" · text loss %1 → %2 nats with the overrides")
                            .arg(result->effect->unchangedLoss, 0, 'f', 3)
                            .arg(result->effect->loss, 0, 'f', 3);
            }
            timing_->setText(text);
        });
    connect(&MapJobs::instance(), &MapJobs::failed, this, [this](const QString& message) {
        statusBar()->showMessage("⚠ a map could not be built: " + message, 15000);
    });
    connect(state_, &AppState::errorChanged, this, [this](const QString& message) {
        if (!message.isEmpty()) statusBar()->showMessage("⚠ " + message, 8000);
    });
}

void MainWindow::setPresentationMode(bool on) {
    presentation_ = on;
    placeCaption();
    const double scale = on ? 1.6 : 1.0;
    for (auto* view : views_) view->setFontScale(scale);
    QFont font = QApplication::font();
    font.setPointSizeF(on ? baseFontSize_ * 1.6 : baseFontSize_);
    editor_->setFont(font);
    strip_->setFont(font);
    if (auto* dock = findChild<QDockWidget*>("formulaDock")) {
        dock->widget()->setFont(font);
        dock->setVisible(on || dock->isVisible());
    }
}

void MainWindow::buildMenus() {
    auto* file = menuBar()->addMenu("&File");
    file->addAction("Open text…", QKeySequence::Open, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, "Open text", QString(),
                                                          "Text (*.txt);;All files (*)");
        if (!path.isEmpty()) openTextFile(path);
    });
    file->addAction("Open model folder…", this, &MainWindow::openModelFolder);
    file->addSeparator();
    file->addAction("Open scene…", this, [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, "Open scene", QString(), "ReluLens scene (*.relulens);;All files (*)");
        if (path.isEmpty()) return;
        QStringList notes;
        const QString error = openSceneFile(path, &notes);
        if (!error.isEmpty()) {
            QMessageBox::warning(this, "ReluLens", error);
        } else if (!notes.isEmpty()) {
            QMessageBox::information(this, "ReluLens",
                                     "The scene is open, except:\n• " + notes.join("\n• "));
        }
    });
    file->addAction("Save scene…", QKeySequence::Save, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, "Save scene", QString(),
                                                          "ReluLens scene (*.relulens)");
        if (path.isEmpty()) return;
        const QString error = saveSceneFile(path.endsWith(".relulens") ? path : path + ".relulens");
        if (!error.isEmpty()) QMessageBox::warning(this, "ReluLens", error);
    });
    file->addAction("Open lesson…", this, [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, "Open lesson", ResourcePaths::resourcesDir() + "/lessons",
            "ReluLens lesson (*.relulens);;All files (*)");
        if (path.isEmpty()) return;
        const QString error = lesson_->openLesson(path);
        if (!error.isEmpty()) {
            QMessageBox::warning(this, "ReluLens", error);
            return;
        }
        findChild<QDockWidget*>("lessonDock")->show();
    });
    file->addSeparator();
    file->addAction("Export current view…", QKeySequence("Ctrl+E"), this,
                    &MainWindow::exportCurrentView);
    file->addAction("Export all views…", QKeySequence("Ctrl+Shift+E"), this,
                    &MainWindow::exportAllViews);
    file->addAction("Copy image of current view", QKeySequence("Ctrl+Shift+C"), this, [this] {
        if (auto* view = currentView()) QApplication::clipboard()->setImage(view->renderImage(2.0));
    });
    file->addSeparator();
    file->addAction("Quit", QKeySequence::Quit, this, &QWidget::close);

    auto* navigate = menuBar()->addMenu("&Navigate");
    navigate->addAction("Next layer", QKeySequence("Ctrl+Down"), this,
                        [this] { state_->stepLayer(1); });
    navigate->addAction("Previous layer", QKeySequence("Ctrl+Up"), this,
                        [this] { state_->stepLayer(-1); });
    navigate->addAction("Next head", QKeySequence("Ctrl+Right"), this,
                        [this] { state_->stepHead(1); });
    navigate->addAction("Previous head", QKeySequence("Ctrl+Left"), this,
                        [this] { state_->stepHead(-1); });
    navigate->addAction("Toggle softmax / ReLU ÷ n", QKeySequence("Ctrl+T"), this,
                        [this] { state_->toggleSoftmaxRelu(); });
    navigate->addSeparator();
    navigate->addAction("Next lesson step", QKeySequence(Qt::Key_PageDown), this,
                        [this] { lesson_->step(1); });
    navigate->addAction("Previous lesson step", QKeySequence(Qt::Key_PageUp), this,
                        [this] { lesson_->step(-1); });
    auto* viewMenu = menuBar()->addMenu("&View");
    auto* presentation = viewMenu->addAction("Presentation mode (large fonts)");
    presentation->setCheckable(true);
    presentation->setShortcut(QKeySequence("F11"));
    connect(presentation, &QAction::toggled, this, [this](bool on) { setPresentationMode(on); });
    viewMenu->addSeparator();
    for (auto* dock : findChildren<QDockWidget*>()) viewMenu->addAction(dock->toggleViewAction());

    auto* help = menuBar()->addMenu("&Help");
    help->addAction("About ReluLens", this,
                    [this] { QMessageBox::about(this, "About ReluLens", aboutText()); });
}

QString MainWindow::aboutText() const {
    const auto result = state_->result();
    const QString reason = QString::fromStdString(core::cudaUnavailableReason());
    QString device = result ? QString::fromStdString(result->device) : QString("cpu");
    if (!reason.isEmpty()) device += " — CUDA is not used: " + reason;
    QString text = QString(
                       "<h3>ReluLens %1</h3><p>See inside a transformer and switch its attention "
                       "from softmax to ReLU and the activations that came after.</p>"
                       "<p>LibTorch %2 · Qt %3<br>Device in use: %4</p>"
                       "<p>ReluLens is free software under the <b>%5</b> licence (GNU General "
                       "Public License, version 3 or later); it comes with no warranty.</p>"
                       "<p>Components:</p><ul>")
                       .arg(RELULENS_VERSION, TORCH_VERSION, qVersion(), device.toHtmlEscaped(),
                            core::kLicence);
    for (const auto& c : core::components()) {
        text += QString("<li>%1 — %2 (%3)</li>")
                    .arg(QString::fromStdString(c.name).toHtmlEscaped(),
                         QString::fromStdString(c.licence),
                         QString::fromStdString(c.role).toHtmlEscaped());
    }
    return text + "</ul>";
}

bool MainWindow::openTextFile(const QString& path) {
    const QString error = loadTextFile(path);
    if (!error.isEmpty()) QMessageBox::warning(this, "ReluLens", error);
    return error.isEmpty();
}

QString MainWindow::loadTextFile(const QString& path) {
    auto text = core::readTextFile(path.toStdString());
    if (!text) return QString::fromStdString(text.error());
    editor_->setPlainText(QString::fromStdString(*text));
    return QString();
}

void MainWindow::openModelFolder() {
    const QString folder = QFileDialog::getExistingDirectory(this, "Open model folder");
    if (folder.isEmpty()) return;
    switchModelFolder(folder, /*showErrors=*/true);
}

void MainWindow::switchModelFolder(const QString& folder, bool showErrors) {
    struct Checked {
        QString error;
        QVector<ModelEntry> catalog;  // with the folder's entry, when it was not listed yet
    };
    const auto catalog = state_->catalog();
    statusBar()->showMessage("Checking " + folder + "…");
    // Every file and every tensor's shape is checked off the GUI thread (a ReluLens folder is
    // read whole), so that a broken folder never replaces the model that is open; the worker
    // then reads the weights and, should that fail, the window goes back to the model it showed.
    MapJobs::instance().post<Checked>(
        folderCheck_, this,
        [folder, catalog] {
            Checked c;
            if (!QFileInfo(folder + "/config.json").exists()) {
                c.error = folder + " has no config.json: not a model folder";
                return c;
            }
            if (auto checked = core::checkModelFolder(folder.toStdString()); !checked) {
                c.error = QString::fromStdString(checked.error());
                return c;
            }
            c.catalog = ModelCatalog::withFolder(catalog, folder);
            return c;
        },
        [this, folder, showErrors](Checked c) {
            statusBar()->clearMessage();
            if (c.error.isEmpty()) {
                if (!ModelCatalog::byFolder(state_->catalog(), folder) &&
                    ModelCatalog::byFolder(c.catalog, folder)) {
                    state_->setCatalog(c.catalog);
                    controls_->reloadModels();
                }
                state_->setModelFolder(folder);
            } else if (showErrors) {
                QMessageBox::warning(this, "ReluLens", c.error);
            } else {
                statusBar()->showMessage("⚠ " + c.error, 15000);
            }
            Q_EMIT modelFolderChecked(folder, c.error);
        });
}

void MainWindow::modelFailed(const QString& folder, const QString& message) {
    loading_->hide();
    cancelLoad_->hide();
    if (state_->effectiveFolder() != folder) return;
    const QString shown = inference_->shownFolder();
    if (!shown.isEmpty() && shown != folder) state_->setModelFolder(shown);
    statusBar()->showMessage("⚠ " + message, 15000);
}

ExportableView* MainWindow::view(const QString& name) const {
    for (auto* v : views_) {
        if (v->viewName() == name) return v;
    }
    return nullptr;
}

ExportableView* MainWindow::currentView() const {
    for (QWidget* w = QApplication::focusWidget(); w; w = w->parentWidget()) {
        if (auto* v = qobject_cast<ExportableView*>(w)) return v;
    }
    return views_.isEmpty() ? nullptr : views_.front();
}

void MainWindow::exportCurrentView() {
    auto* view = currentView();
    if (!view) return;
    const QString dir = Settings::string(Settings::Key::LastExportDir);
    const QString path = QFileDialog::getSaveFileName(
        this, "Export " + view->title(), dir + "/relulens-" + view->viewName() + ".png",
        "PNG image (*.png);;SVG (*.svg);;PDF (*.pdf);;CSV data (*.csv)");
    if (path.isEmpty()) return;  // the dialog already asked before overwriting
    double scale = 2.0;
    if (QFileInfo(path).suffix().toLower() == "png") {
        bool ok = false;
        scale = QInputDialog::getDouble(
            this, "PNG scale", "Scale factor (2 = print, 1 = screen):", 2.0, 0.5, 8.0, 1, &ok);
        if (!ok) return;
    }
    QString error;
    if (!view->exportTo(path, scale, &error)) {
        QMessageBox::warning(this, "ReluLens", error);
        return;
    }
    Settings::setValue(Settings::Key::LastExportDir, QFileInfo(path).absolutePath());
    statusBar()->showMessage("written " + path, 5000);
}

void MainWindow::exportAllViews() {
    const QString dir = QFileDialog::getExistingDirectory(
        this, "Export every view to", Settings::string(Settings::Key::LastExportDir));
    if (dir.isEmpty()) return;
    QStringList existing;
    for (auto* view : views_) {
        if (QFileInfo::exists(dir + "/relulens-" + view->viewName() + ".png"))
            existing << view->viewName();
    }
    if (!existing.isEmpty() &&
        QMessageBox::question(this, "ReluLens",
                              "Replace the existing files for " + existing.join(", ") + "?") !=
            QMessageBox::Yes) {
        return;
    }
    for (auto* view : views_) {
        for (const char* suffix : {".png", ".svg", ".pdf", ".csv"}) {
            QString error;
            if (!view->exportTo(dir + "/relulens-" + view->viewName() + suffix, 2.0, &error)) {
                QMessageBox::warning(this, "ReluLens", error);
                return;
            }
        }
    }
    Settings::setValue(Settings::Key::LastExportDir, dir);
    statusBar()->showMessage("every view written to " + dir, 5000);
}

void MainWindow::saveSettings() const {
    Settings::saveSession(*state_, *this);
}

void MainWindow::resizeEvent(QResizeEvent* event) {
    QMainWindow::resizeEvent(event);
    placeCaption();
}

void MainWindow::closeEvent(QCloseEvent* event) {
    saveSettings();
    event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
    const auto urls = event->mimeData()->urls();
    if (!urls.isEmpty() && urls.first().isLocalFile()) openTextFile(urls.first().toLocalFile());
}

}  // namespace relulens::ui
