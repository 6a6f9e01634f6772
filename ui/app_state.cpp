#include "ui/app_state.h"

#include <algorithm>

#include "core/model_folder.h"

namespace relulens::ui {

AppState::AppState(QObject* parent) : QObject(parent) {}

void AppState::setText(const QString& text) {
    if (text == text_) return;
    text_ = text;
    Q_EMIT inputChanged();
}

void AppState::setModelFolder(const QString& folder) {
    if (folder == modelFolder_) return;
    modelFolder_ = folder;
    auto info = core::readModelConfig(folder.toStdString());
    const bool wasGated = modelInfo_.gatedFfn;
    modelInfo_ = info ? *info : core::ModelInfo{};
    if (info) {
        // A memory of another kind (gated or not) starts from the activation it was trained
        // with; between models of one kind the chosen FFN variant stays.
        const auto choices = modelInfo_.ffnChoices();
        if (wasGated != modelInfo_.gatedFfn ||
            std::find(choices.begin(), choices.end(), run_.ffn) == choices.end()) {
            run_.ffn = modelInfo_.trained.ffn;
        }
        // Overrides naming a layer or head this model lacks are dropped.
        auto& overrides = run_.overrides;
        overrides.erase(std::remove_if(overrides.begin(), overrides.end(),
                                       [&](const core::AttentionOverride& o) {
                                           return o.layer >= modelInfo_.nLayers ||
                                                  o.head >= modelInfo_.nHeads;
                                       }),
                        overrides.end());
    }
    Q_EMIT inputChanged();
}

void AppState::setOverride(const core::AttentionOverride& entry) {
    core::RunSpec run = run_;
    auto& overrides = run.overrides;
    overrides.erase(std::remove_if(overrides.begin(), overrides.end(),
                                   [&](const core::AttentionOverride& o) {
                                       return o.layer == entry.layer && o.head == entry.head;
                                   }),
                    overrides.end());
    overrides.push_back(entry);
    setRun(run);
}

void AppState::clearOverrides() {
    if (run_.overrides.empty()) return;
    core::RunSpec run = run_;
    run.overrides.clear();
    setRun(run);
}

void AppState::setRun(const core::RunSpec& runIn) {
    core::RunSpec run = runIn;
    if (!modelFolder_.isEmpty() && modelInfo_.nLayers > 0) {
        const auto choices = modelInfo_.ffnChoices();
        if (std::find(choices.begin(), choices.end(), run.ffn) == choices.end()) run.ffn = run_.ffn;
    }
    if (core::sameVariants(run, run_)) return;
    run_ = run;
    Q_EMIT inputChanged();
}

void AppState::setLensWanted(bool wanted) {
    if (wanted == lensWanted_) return;
    lensWanted_ = wanted;
    if (wanted && result_ && !result_->lens) Q_EMIT inputChanged();
}

void AppState::setMode(VariantMode mode) {
    if (mode == mode_) return;
    mode_ = mode;
    Q_EMIT inputChanged();
}

void AppState::setTauScale(double tau) {
    if (tau == tauScale_ || !(tau > 0)) return;
    tauScale_ = tau;
    Q_EMIT inputChanged();
}

void AppState::setCatalog(QVector<ModelEntry> catalog) {
    catalog_ = std::move(catalog);
}

QString AppState::effectiveFolder() const {
    if (mode_ == VariantMode::TrainedVariant) {
        const auto* open = ModelCatalog::byFolder(catalog_, modelFolder_);
        const int64_t context = open ? open->trainingContext : 0;
        if (const auto* sibling = ModelCatalog::trainedWith(catalog_, run_, context))
            return sibling->folder;
    }
    return modelFolder_;
}

void AppState::clampSelection() {
    if (!result_) return;
    layer_ = std::clamp(layer_, 0, int(result_->model.nLayers) - 1);
    head_ = std::clamp(head_, -1, int(result_->model.nHeads) - 1);
    if (query_ >= int(result_->tokens.size())) query_ = int(result_->tokens.size()) - 1;
}

void AppState::setLayer(int layer) {
    const int before = layer_;
    layer_ = layer;
    clampSelection();
    if (layer_ != before) Q_EMIT layerHeadChanged();
}

void AppState::setHead(int head) {
    const int before = head_;
    head_ = head;
    clampSelection();
    if (head_ != before) Q_EMIT layerHeadChanged();
}

void AppState::setQueryToken(int token) {
    const int before = query_;
    query_ = token;
    clampSelection();
    if (query_ != before) Q_EMIT queryChanged();
}

void AppState::stepLayer(int delta) {
    if (!result_) return;
    const int n = int(result_->model.nLayers);
    setLayer(((layer_ + delta) % n + n) % n);
}

void AppState::stepHead(int delta) {
    if (!result_) return;
    const int n = int(result_->model.nHeads) + 1;  // heads plus "mean"
    const int index = ((head_ + 1 + delta) % n + n) % n;
    setHead(index - 1);
}

void AppState::toggleSoftmaxRelu() {
    core::RunSpec run = run_;
    if (run.attention.kind == core::AttentionKind::Softmax) {
        run.attention.kind = core::AttentionKind::ReluLen;
        run.attention.lengthExponent = 1.0;
    } else {
        run.attention.kind = core::AttentionKind::Softmax;
    }
    setRun(run);
}

core::RunSpec AppState::comparisonRun() const {
    core::RunSpec other = run_;
    if (run_.attention.kind == core::AttentionKind::Softmax) {
        other.attention.kind = core::AttentionKind::ReluLen;
        other.attention.lengthExponent = 1.0;
    } else {
        other.attention = core::AttentionSpec{};
    }
    return other;
}

void AppState::setSlot(int slot) {
    if (slot == slot_) return;
    slot_ = slot;
    Q_EMIT slotChanged();
}

void AppState::setResult(std::shared_ptr<const core::CaptureResult> result,
                         std::shared_ptr<const core::CaptureResult> comparison,
                         std::shared_ptr<const core::SlotVocabulary> vocabulary) {
    result_ = std::move(result);
    comparison_ = std::move(comparison);
    if (vocabulary) vocabulary_ = std::move(vocabulary);
    if (result_ && slot_ >= result_->model.dFf) slot_ = -1;
    clampSelection();
    if (!error_.isEmpty()) setError(QString());
    Q_EMIT resultChanged();
}

void AppState::setComparison(std::shared_ptr<const core::CaptureResult> comparison) {
    comparison_ = std::move(comparison);
    Q_EMIT comparisonChanged();
}

void AppState::setError(const QString& message) {
    if (message == error_) return;
    error_ = message;
    Q_EMIT errorChanged(message);
}

QString AppState::provenance() const {
    if (!result_) return QString();
    const auto& r = *result_;
    QString text = QString("attention %1, FFN %2")
                       .arg(QString::fromStdString(r.run.attention.label()),
                            QString::fromStdString(core::ffnKindName(r.run.ffn)));
    if (r.trainedWithRun) return text + " — as trained";
    return text + QString(" — swapped onto weights trained with %1 / %2")
                      .arg(QString::fromStdString(r.model.trained.attention.label()),
                           QString::fromStdString(core::ffnKindName(r.model.trained.ffn)));
}

}  // namespace relulens::ui
