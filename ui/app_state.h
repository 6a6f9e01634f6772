// The one application state: the text, the model, the activation choices, the selection and the
// latest result. Lives on the GUI thread; views read it and subscribe to its signals, and never
// call each other.
#pragma once
#include <QObject>
#include <QString>
#include <QVector>
#include <memory>

#include "core/capture.h"
#include "core/slot_vocabulary.h"
#include "ui/model_catalog.h"

namespace relulens::ui {

enum class VariantMode { SameWeights, TrainedVariant };

class AppState : public QObject {
    Q_OBJECT
public:
    explicit AppState(QObject* parent = nullptr);

    // Inputs: changing any of these needs a new forward pass.
    const QString& text() const { return text_; }
    const QString& modelFolder() const { return modelFolder_; }
    const core::RunSpec& run() const { return run_; }
    VariantMode mode() const { return mode_; }
    double tauScale() const { return tauScale_; }
    void setText(const QString& text);
    // Switches model. When the new model's FFN cannot run the current FFN variant (a gated
    // FFN has no softmax memory, an ungated one no silu gate), the run takes the variant the
    // model was trained with.
    void setModelFolder(const QString& folder);
    // What config.json says of the chosen model (read when the folder is set).
    const core::ModelInfo& modelInfo() const { return modelInfo_; }
    void setRun(const core::RunSpec& run);
    // A different attention (or an ablation) for one layer or one head, on top of the run's:
    // replaces an earlier one for the same layer and head, and recomputes.
    void setOverride(const core::AttentionOverride& entry);
    void clearOverrides();
    void setMode(VariantMode mode);
    void setTauScale(double tau);
    // Whether a view that shows the logit lens is open: only then does a pass compute it (turning
    // it on recomputes when the shown result lacks it).
    bool lensWanted() const { return lensWanted_; }
    void setLensWanted(bool wanted);

    // The folder a forward pass uses: the chosen model, or in trained-variant mode the sibling
    // trained with the current variants (when one exists).
    QString effectiveFolder() const;
    const QVector<ModelEntry>& catalog() const { return catalog_; }
    void setCatalog(QVector<ModelEntry> catalog);

    // Selection: no forward pass needed.
    int layer() const { return layer_; }
    int head() const { return head_; }  // -1: mean over heads
    int queryToken() const { return query_; }
    void setLayer(int layer);
    void setHead(int head);
    void setQueryToken(int token);
    void stepLayer(int delta);
    void stepHead(int delta);
    void toggleSoftmaxRelu();

    // The latest result (null before the first one).
    std::shared_ptr<const core::CaptureResult> result() const { return result_; }
    // The same text under the comparison variant (softmax, or ReLU ÷ n when softmax is current).
    std::shared_ptr<const core::CaptureResult> comparison() const { return comparison_; }
    // Per-slot promoted vocabulary of the model that produced the result.
    std::shared_ptr<const core::SlotVocabulary> slotVocabulary() const { return vocabulary_; }
    void setResult(std::shared_ptr<const core::CaptureResult> result,
                   std::shared_ptr<const core::CaptureResult> comparison = nullptr,
                   std::shared_ptr<const core::SlotVocabulary> vocabulary = nullptr);
    // The comparison arrives after the result it belongs to (it is computed second).
    void setComparison(std::shared_ptr<const core::CaptureResult> comparison);
    core::RunSpec comparisonRun() const;

    // The FFN memory slot selected in the memory view (-1: none).
    int slot() const { return slot_; }
    void setSlot(int slot);
    const QString& error() const { return error_; }
    void setError(const QString& message);

    // "relu_len on weights trained with softmax" — what every view prints in its title.
    QString provenance() const;

Q_SIGNALS:
    void inputChanged();
    // The selection, in three parts so that moving the outline or the selected token never
    // rebuilds a map: the layer or head, the query token, the memory slot.
    void layerHeadChanged();
    void queryChanged();
    void slotChanged();
    void resultChanged();
    void comparisonChanged();
    void errorChanged(const QString& message);

private:
    void clampSelection();

    QString text_;
    QString modelFolder_;
    core::ModelInfo modelInfo_;
    core::RunSpec run_;
    VariantMode mode_ = VariantMode::SameWeights;
    double tauScale_ = 0.1;
    bool lensWanted_ = false;
    QVector<ModelEntry> catalog_;
    int layer_ = 0;
    int head_ = 0;
    int query_ = -1;
    std::shared_ptr<const core::CaptureResult> result_;
    std::shared_ptr<const core::CaptureResult> comparison_;
    std::shared_ptr<const core::SlotVocabulary> vocabulary_;
    int slot_ = -1;
    QString error_;
};

}  // namespace relulens::ui
