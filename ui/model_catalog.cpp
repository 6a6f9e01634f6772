#include "ui/model_catalog.h"

#include <QDir>
#include <QFileInfo>
#include <QLocale>

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
            ModelEntry entry{QString::fromStdString(info->name), folder, info->trained, d == 0};
            if (info->family == "relulens") entry.trainingContext = info->contextLength;
            models.push_back(entry);
        }
    }
    return models;
}

QString ModelEntry::label() const {
    if (trainingContext <= 0) return name;
    return QString("%1 — trained at %2 tokens")
        .arg(name, QLocale(QLocale::English).toString(qlonglong(trainingContext)));
}

QVector<ModelEntry> ModelCatalog::scanDefault() {
    return scan(ResourcePaths::modelDirs());
}

const ModelEntry* ModelCatalog::trainedWith(const QVector<ModelEntry>& models,
                                            const core::RunSpec& run, int64_t trainingContext) {
    const ModelEntry* first = nullptr;
    for (const auto& m : models) {
        if (!core::sameVariants(m.trained, run)) continue;
        if (m.trainingContext == trainingContext) return &m;
        if (!first) first = &m;
    }
    return first;
}

const ModelEntry* ModelCatalog::byFolder(const QVector<ModelEntry>& models, const QString& folder) {
    const QString canonical = QFileInfo(folder).canonicalFilePath();
    for (const auto& m : models) {
        if (QFileInfo(m.folder).canonicalFilePath() == canonical) return &m;
    }
    return nullptr;
}

QVector<ModelEntry> ModelCatalog::withFolder(QVector<ModelEntry> models, const QString& folder) {
    if (byFolder(models, folder)) return models;
    for (const auto& m : scan({QFileInfo(folder).absolutePath()})) {
        if (QFileInfo(m.folder) != QFileInfo(folder)) continue;
        models.push_back(m);
        models.back().bundled = false;
    }
    return models;
}

}  // namespace relulens::ui
