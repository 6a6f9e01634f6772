#include "ui/resource_paths.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

namespace relulens::ui {

namespace {

QString executableDir() {
    if (QCoreApplication::instance()) return QCoreApplication::applicationDirPath();
    return QFileInfo(QStringLiteral("/proc/self/exe")).symLinkTarget().isEmpty()
               ? QDir::currentPath()
               : QFileInfo(QFileInfo(QStringLiteral("/proc/self/exe")).symLinkTarget()).absolutePath();
}

}  // namespace

QString ResourcePaths::resourcesDir() {
    const QString env = qEnvironmentVariable("RELULENS_RESOURCES");
    if (!env.isEmpty() && QFileInfo(env).isDir()) return QDir(env).absolutePath();
    const QString exe = executableDir();
    for (const QString& candidate : {exe + "/../share/relulens", exe + "/../../resources"}) {
        if (QFileInfo(candidate + "/models").isDir()) return QDir(candidate).absolutePath();
    }
    return QDir(exe + "/../../resources").absolutePath();
}

QStringList ResourcePaths::modelDirs() {
    QStringList dirs{resourcesDir() + "/models"};
    dirs << QDir::homePath() + "/.local/share/relulens/models";
    return dirs;
}

QString ResourcePaths::sampleTextPath() { return resourcesDir() + "/sample.txt"; }

}  // namespace relulens::ui
