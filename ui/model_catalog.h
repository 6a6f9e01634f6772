// The models a user can pick: every folder with a config.json under the model directories,
// by name, with the variants each was trained with (for "trained variant" mode).
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
};

class ModelCatalog {
public:
    static QVector<ModelEntry> scan(const QStringList& dirs);
    static QVector<ModelEntry> scanDefault();
    // The sibling trained with `run` (exact variant match), if any.
    static const ModelEntry* trainedWith(const QVector<ModelEntry>& models,
                                         const core::RunSpec& run);
    static const ModelEntry* byFolder(const QVector<ModelEntry>& models, const QString& folder);
};

}  // namespace relulens::ui
