// The models a user can pick: every folder with a config.json under the model directories,
// by name, with the variants each was trained with and, for ReluLens's own models, the length
// of text it was trained on (for "trained variant" mode, which stays among siblings trained at
// the same length).
#pragma once
#include <QString>
#include <QVector>

#include "core/variants.h"

namespace relulens::ui {

struct ModelEntry {
    QString name;
    QString folder;
    core::RunSpec trained;
    bool bundled = false;
    // Tokens per training sequence for models ReluLens trained; 0 for other families, whose
    // config gives a position limit, not what they were trained at.
    int64_t trainingContext = 0;

    // What the model list shows, e.g. "long-softmax — trained at 1,024 tokens".
    QString label() const;
};

class ModelCatalog {
public:
    static QVector<ModelEntry> scan(const QStringList& dirs);
    static QVector<ModelEntry> scanDefault();
    // The sibling trained with `run` (exact variant match), if any; among several, one trained
    // at `trainingContext` tokens (the open model's), so that switching the variant of a
    // model trained at 1,024 tokens stays among those trained at 1,024.
    static const ModelEntry* trainedWith(const QVector<ModelEntry>& models,
                                         const core::RunSpec& run, int64_t trainingContext = 0);
    static const ModelEntry* byFolder(const QVector<ModelEntry>& models, const QString& folder);
    // `models` with the entry of `folder` added, as a model from elsewhere (not bundled), when
    // it is not listed yet; `models` unchanged when it is, or when the folder holds no model.
    // Reads the folder's config.json: call it off the GUI thread.
    static QVector<ModelEntry> withFolder(QVector<ModelEntry> models, const QString& folder);
};

}  // namespace relulens::ui
