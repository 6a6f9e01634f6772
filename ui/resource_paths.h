// Where ReluLens finds its bundled files and a user's own models, relative to the executable
// (build tree: build/bin -> resources/; installed: /usr/bin -> /usr/share/relulens/).
#pragma once
#include <QString>
#include <QStringList>

namespace relulens::ui {

class ResourcePaths {
public:
    // RELULENS_RESOURCES, then <exe>/../share/relulens, then <exe>/../../resources.
    static QString resourcesDir();
    // Folders searched for models: bundled, then ~/.local/share/relulens/models.
    static QStringList modelDirs();
    static QString sampleTextPath();
};

}  // namespace relulens::ui
