// The always-visible controls: model picker, attention variant (grouped: the papers' variants,
// then the later ones; with family h and exponent a, sigmoid's bias, ssmax's sigma),
// FFN variant, same-weights / trained-variant mode, layer and head (right-click: per-layer and
// per-head overrides), and the overrides in force with a button that clears them. They edit the
// AppState and follow it when it changes elsewhere (shortcuts, clicks in views).
#pragma once
#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QSlider;
class QSpinBox;
class QLabel;
class QToolButton;

namespace relulens::ui {

class AppState;

class ActivationControls : public QWidget {
    Q_OBJECT
public:
    explicit ActivationControls(AppState* state, QWidget* parent = nullptr);
    QComboBox* attentionBox() const { return attention_; }
    QComboBox* modelBox() const { return model_; }

Q_SIGNALS:
    void openModelFolderRequested();

public Q_SLOTS:
    void syncFromState();
    void reloadModels();

private:
    void pushRun();

    AppState* state_;
    QComboBox* model_;
    QComboBox* attention_;
    QComboBox* family_;
    QSlider* exponent_;
    QLabel* exponentLabel_;
    QDoubleSpinBox* sigmoidBias_;
    QDoubleSpinBox* ssmaxSigma_;
    QComboBox* ffn_;
    QComboBox* mode_;
    QSpinBox* layer_;
    QComboBox* head_;
    QLabel* overrides_;
    QToolButton* clearOverrides_;
    bool syncing_ = false;
};

}  // namespace relulens::ui
