#include "ui/resource_paths.h"

#include <QDir>

#include "core/install_paths.h"

namespace relulens::ui {

QString ResourcePaths::resourcesDir() {
    return QString::fromStdString(core::resourcesDir());
}

QStringList ResourcePaths::modelDirs() {
    QStringList dirs{resourcesDir() + "/models"};
    dirs << QDir::homePath() + "/.local/share/relulens/models";
    return dirs;
}

QString ResourcePaths::sampleTextPath() {
    return resourcesDir() + "/sample.txt";
}

}  // namespace relulens::ui
