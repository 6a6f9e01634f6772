#include "ui/activation_controls.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QToolButton>

#include "ui/app_state.h"
#include "ui/override_menu.h"

namespace relulens::ui {

namespace {

// A heading in a combo box's list that cannot be chosen.
void addHeading(QComboBox* box, const QString& title) {
    box->addItem(title);
    if (auto* model = qobject_cast<QStandardItemModel*>(box->model())) {
        auto* item = model->item(box->count() - 1);
        item->setFlags(item->flags() & ~(Qt::ItemIsSelectable | Qt::ItemIsEnabled));
        QFont font = item->font();
        font.setBold(true);
        item->setFont(font);
    }
}

// "relu²" as people write it; the others by their names.
QString familyLabel(core::FamilyFunction h) {
    return h == core::FamilyFunction::Relu2 ? QStringLiteral("relu²")
                                            : QString::fromStdString(core::familyFunctionName(h));
}
QString ffnLabel(core::FfnKind kind) {
    switch (kind) {
        case core::FfnKind::SoftmaxLn:
            return "softmax + LN";
        case core::FfnKind::GeluTanh:
            return "gelu (tanh)";
        default:
            return QString::fromStdString(core::ffnKindName(kind));
    }
}

QLabel* caption(const QString& text, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    label->setStyleSheet("color: #555;");
    return label;
}

}  // namespace

ActivationControls::ActivationControls(AppState* state, QWidget* parent)
    : QWidget(parent), state_(state) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 2);
    model_ = new QComboBox(this);
    model_->setMinimumContentsLength(12);
    attention_ = new QComboBox(this);
    attention_->setObjectName("attentionBox");
    addHeading(attention_, "The two papers");
    bool later = false;
    for (auto kind : core::attentionKinds()) {
        if (!later && !core::isPapersVariant(kind)) {
            later = true;
            attention_->insertSeparator(attention_->count());
            addHeading(attention_, "Later proposals");
        }
        attention_->addItem(attentionLabel(kind), int(kind));
    }
    attention_->setToolTip("Attention activation (Ctrl+T toggles softmax / ReLU ÷ n)");
    family_ = new QComboBox(this);
    for (auto h : core::familyFunctions()) family_->addItem(familyLabel(h), int(h));
    exponent_ = new QSlider(Qt::Horizontal, this);
    exponent_->setRange(0, 200);
    exponent_->setValue(100);
    exponent_->setFixedWidth(110);
    exponentLabel_ = new QLabel("a = 1.00", this);
    // Sigmoid's bias: the lowest value stands for b_i = -log n_i, the default.
    sigmoidBias_ = new QDoubleSpinBox(this);
    sigmoidBias_->setObjectName("sigmoidBias");
    sigmoidBias_->setRange(-20.05, 20.0);
    sigmoidBias_->setSingleStep(0.5);
    sigmoidBias_->setDecimals(2);
    sigmoidBias_->setPrefix("b = ");
    sigmoidBias_->setSpecialValueText("b = −log n");
    sigmoidBias_->setValue(sigmoidBias_->minimum());
    sigmoidBias_->setToolTip("Bias b in σ(s + b); lowest value: b = −log n (Ramapuram et al.)");
    ssmaxSigma_ = new QDoubleSpinBox(this);
    ssmaxSigma_->setObjectName("ssmaxSigma");
    ssmaxSigma_->setRange(0.01, 4.0);
    ssmaxSigma_->setSingleStep(0.05);
    ssmaxSigma_->setDecimals(2);
    ssmaxSigma_->setPrefix("σ = ");
    ssmaxSigma_->setValue(core::AttentionSpec::kDefaultSsmaxSigma);
    ssmaxSigma_->setToolTip("Scale σ in softmax(σ · log n · s) (Nakanishi 2025; 0.43 by default)");
    ffn_ = new QComboBox(this);
    ffn_->setObjectName("ffnBox");
    ffn_->setToolTip("FFN memory activation (a gated FFN swaps its gate's activation)");
    mode_ = new QComboBox(this);
    mode_->addItems({"same weights", "trained variant"});
    mode_->setToolTip(
        "Same weights: swap the activation on the loaded model.\n"
        "Trained variant: switch to the bundled model trained with it.");
    layer_ = new QSpinBox(this);
    head_ = new QComboBox(this);
    head_->setObjectName("headBox");
    layout->addWidget(caption("Model", this));
    layout->addWidget(model_);
    layout->addWidget(caption("Attention", this));
    layout->addWidget(attention_);
    layout->addWidget(family_);
    layout->addWidget(exponent_);
    layout->addWidget(exponentLabel_);
    layout->addWidget(sigmoidBias_);
    layout->addWidget(ssmaxSigma_);
    layout->addWidget(caption("FFN", this));
    layout->addWidget(ffn_);
    layout->addWidget(mode_);
    layout->addWidget(caption("Layer", this));
    layout->addWidget(layer_);
    layout->addWidget(caption("Head", this));
    layout->addWidget(head_);
    overrides_ = new QLabel(this);
    overrides_->setObjectName("overridesLabel");
    overrides_->setToolTip(
        "What differs from the attention chosen for the whole model.\n"
        "Right-click a head (head grid, sparsity, layer or head box) to change it.");
    clearOverrides_ = new QToolButton(this);
    clearOverrides_->setObjectName("clearOverrides");
    clearOverrides_->setText("Clear");
    clearOverrides_->setToolTip("Clear every per-layer and per-head override");
    layout->addWidget(overrides_);
    layout->addWidget(clearOverrides_);
    layout->addStretch();
    connect(clearOverrides_, &QToolButton::clicked, state_, &AppState::clearOverrides);
    for (QWidget* selector : {static_cast<QWidget*>(layer_), static_cast<QWidget*>(head_)}) {
        selector->setContextMenuPolicy(Qt::CustomContextMenu);
        connect(selector, &QWidget::customContextMenuRequested, this,
                [this, selector](const QPoint& at) {
                    if (!state_->result()) return;
                    overrideMenu(state_, state_->layer(), state_->head(), this)
                        ->popup(selector->mapToGlobal(at));
                });
    }

    auto run = [this] {
        if (!syncing_) pushRun();
    };
    connect(attention_, qOverload<int>(&QComboBox::currentIndexChanged), this, run);
    connect(family_, qOverload<int>(&QComboBox::currentIndexChanged), this, run);
    connect(ffn_, qOverload<int>(&QComboBox::currentIndexChanged), this, run);
    connect(exponent_, &QSlider::valueChanged, this, run);
    connect(sigmoidBias_, qOverload<double>(&QDoubleSpinBox::valueChanged), this, run);
    connect(ssmaxSigma_, qOverload<double>(&QDoubleSpinBox::valueChanged), this, run);
    connect(mode_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this](int index) {
        if (!syncing_)
            state_->setMode(index == 1 ? VariantMode::TrainedVariant : VariantMode::SameWeights);
    });
    connect(layer_, qOverload<int>(&QSpinBox::valueChanged), this, [this](int value) {
        if (!syncing_) state_->setLayer(value);
    });
    connect(head_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this](int index) {
        if (!syncing_ && index >= 0) state_->setHead(index - 1);
    });
    connect(model_, qOverload<int>(&QComboBox::activated), this, [this](int index) {
        const QString folder = model_->itemData(index).toString();
        if (folder.isEmpty()) {
            Q_EMIT openModelFolderRequested();
            syncFromState();
        } else {
            state_->setModelFolder(folder);
        }
    });
    connect(state_, &AppState::inputChanged, this, &ActivationControls::syncFromState);
    connect(state_, &AppState::layerHeadChanged, this, &ActivationControls::syncFromState);
    connect(state_, &AppState::resultChanged, this, &ActivationControls::syncFromState);
    reloadModels();
}

void ActivationControls::reloadModels() {
    syncing_ = true;
    model_->clear();
    for (const auto& m : state_->catalog()) model_->addItem(m.label(), m.folder);
    model_->addItem("Open model folder…", QString());
    syncing_ = false;
    syncFromState();
}

void ActivationControls::pushRun() {
    core::RunSpec run = state_->run();
    const QVariant kind = attention_->currentData();
    if (kind.isValid()) run.attention.kind = core::AttentionKind(kind.toInt());
    if (family_->currentIndex() >= 0) {
        run.attention.familyFunction = core::FamilyFunction(family_->currentData().toInt());
    }
    run.attention.lengthExponent = exponent_->value() / 100.0;
    if (sigmoidBias_->value() == sigmoidBias_->minimum()) {
        run.attention.sigmoidBias.reset();
    } else {
        run.attention.sigmoidBias = sigmoidBias_->value();
    }
    run.attention.ssmaxSigma = ssmaxSigma_->value();
    if (ffn_->currentIndex() >= 0) run.ffn = core::FfnKind(ffn_->currentData().toInt());
    exponentLabel_->setText(QString("a = %1").arg(run.attention.lengthExponent, 0, 'f', 2));
    state_->setRun(run);
}

void ActivationControls::syncFromState() {
    syncing_ = true;
    const auto& run = state_->run();
    attention_->setCurrentIndex(attention_->findData(int(run.attention.kind)));
    family_->setCurrentIndex(family_->findData(int(run.attention.familyFunction)));
    const auto choices = state_->modelInfo().ffnChoices();
    if (ffn_->count() != int(choices.size()) || ffn_->itemData(0).toInt() != int(choices.front())) {
        ffn_->clear();
        for (auto kind : choices) ffn_->addItem(ffnLabel(kind), int(kind));
    }
    ffn_->setCurrentIndex(ffn_->findData(int(run.ffn)));
    exponent_->setValue(int(std::lround(run.attention.lengthExponent * 100)));
    exponentLabel_->setText(QString("a = %1").arg(run.attention.lengthExponent, 0, 'f', 2));
    const bool usesExponent = run.attention.kind == core::AttentionKind::Family ||
                              run.attention.kind == core::AttentionKind::ReluLen;
    family_->setVisible(run.attention.kind == core::AttentionKind::Family);
    exponent_->setVisible(usesExponent);
    exponentLabel_->setVisible(usesExponent);
    sigmoidBias_->setValue(run.attention.sigmoidBias ? *run.attention.sigmoidBias
                                                     : sigmoidBias_->minimum());
    sigmoidBias_->setVisible(run.attention.kind == core::AttentionKind::Sigmoid);
    ssmaxSigma_->setValue(run.attention.ssmaxSigma);
    ssmaxSigma_->setVisible(run.attention.kind == core::AttentionKind::Ssmax);
    mode_->setCurrentIndex(state_->mode() == VariantMode::TrainedVariant ? 1 : 0);
    const int index = model_->findData(state_->modelFolder());
    if (index >= 0) model_->setCurrentIndex(index);
    if (auto result = state_->result()) {
        layer_->setRange(0, int(result->model.nLayers) - 1);
        if (head_->count() != result->model.nHeads + 1) {
            head_->clear();
            head_->addItem("mean");
            for (int h = 0; h < result->model.nHeads; ++h) head_->addItem(QString::number(h));
        }
    }
    layer_->setValue(state_->layer());
    head_->setCurrentIndex(state_->head() + 1);
    const bool overridden = !run.overrides.empty();
    overrides_->setText("Overrides: " + overridesText(run));
    overrides_->setVisible(overridden);
    clearOverrides_->setVisible(overridden);
    syncing_ = false;
}

}  // namespace relulens::ui
