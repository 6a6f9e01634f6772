#include "ui/model_catalog.h"

#include <QDir>
#include <QFileInfo>

#include "core/capture.h"
#include "core/model_folder.h"
#include "ui/resource_paths.h"

namespace relulens::ui {

QVector<ModelEntry> ModelCatalog::scan(const QStringList& dirs) {
    QVector<ModelEntry> models;
    for (int d = 0; d < dirs.size(); ++d) {
        QDir dir(dirs[d]);
        if (!dir.exists()) continue;
        for (const QString& sub : dir.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
            const QString folder = dir.absoluteFilePath(sub);
            auto info = core::readModelConfig(folder.toStdString());
            if (!info) continue;
            models.push_back({QString::fromStdString(info->name), folder, info->trained, d == 0});
        }
    }
    return models;
}

QVector<ModelEntry> ModelCatalog::scanDefault() { return scan(ResourcePaths::modelDirs()); }

const ModelEntry* ModelCatalog::trainedWith(const QVector<ModelEntry>& models,
                                            const core::RunSpec& run) {
    for (const auto& m : models) {
        if (core::sameVariants(m.trained, run)) return &m;
    }
    return nullptr;
}

const ModelEntry* ModelCatalog::byFolder(const QVector<ModelEntry>& models, const QString& folder) {
    const QString canonical = QFileInfo(folder).canonicalFilePath();
    for (const auto& m : models) {
        if (QFileInfo(m.folder).canonicalFilePath() == canonical) return &m;
    }
    return nullptr;
}

}  // namespace relulens::ui
