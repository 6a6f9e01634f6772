#include "ui/scene_state.h"

#include <QDir>
#include <QFileInfo>

#include "ui/app_state.h"
#include "ui/attention_map_view.h"
#include "ui/model_catalog.h"
#include "ui/view_factory.h"

namespace relulens::ui {

namespace {

bool isPath(const QString& model) {
    return model.contains('/') || model.startsWith('.');
}

const ModelEntry* bundledNamed(const QVector<ModelEntry>& catalog, const QString& name) {
    for (const auto& m : catalog) {
        if (m.bundled && m.name == name) return &m;
    }
    return nullptr;
}

}  // namespace

core::Scene sceneForFile(core::Scene scene, const QString& fileDir) {
    const QString model = QString::fromStdString(scene.model);
    if (!QFileInfo(model).isAbsolute() || fileDir.isEmpty()) return scene;
    const QString relative = QDir(fileDir).relativeFilePath(model);
    if (!relative.startsWith("..")) scene.model = ("./" + relative).toStdString();
    return scene;
}

core::Scene sceneFromFile(core::Scene scene, const QString& fileDir) {
    const QString model = QString::fromStdString(scene.model);
    if (isPath(model) && QFileInfo(model).isRelative()) {
        scene.model = QDir::cleanPath(QDir(fileDir).absoluteFilePath(model)).toStdString();
    }
    return scene;
}

core::Scene sceneFromState(const AppState& state) {
    core::Scene s;
    const auto* entry = ModelCatalog::byFolder(state.catalog(), state.modelFolder());
    s.model = entry && entry->bundled
                  ? entry->name.toStdString()
                  : QFileInfo(state.modelFolder()).absoluteFilePath().toStdString();
    s.text = state.text().toStdString();
    s.run = state.run();
    s.trainedVariant = state.mode() == VariantMode::TrainedVariant;
    s.tau = state.tauScale();
    s.layer = state.layer();
    s.head = state.head();
    s.query = state.queryToken();
    s.slot = state.slot();
    return s;
}

void addMapView(core::Scene& scene, const AttentionMapView& map) {
    scene.zoom = map.zoom();
    scene.pooling = map.pooling();
    scene.logScale = map.logScale();
}

QString sceneModelFolder(const core::Scene& scene, const AppState& state, QString* problem) {
    const QString model = QString::fromStdString(scene.model);
    if (model.isEmpty()) {
        *problem = "the scene names no model";
        return QString();
    }
    if (!isPath(model)) {
        if (const auto* entry = bundledNamed(state.catalog(), model)) return entry->folder;
        *problem = QString("the model '%1' is not among the bundled models (%2)").arg(model, [&] {
            QStringList names;
            for (const auto& m : state.catalog()) {
                if (m.bundled) names << m.name;
            }
            return names.join(", ");
        }());
        return QString();
    }
    if (!QFileInfo(model + "/config.json").exists()) {
        *problem = QString("the model folder %1 is missing (or has no config.json)").arg(model);
        return QString();
    }
    return QFileInfo(model).absoluteFilePath();
}

QStringList applySceneInputs(const core::Scene& scene, AppState& state) {
    QStringList notes;
    QString problem;
    const QString folder = sceneModelFolder(scene, state, &problem);
    if (folder.isEmpty()) {
        notes << problem + "; the open model is kept";
    } else {
        if (!ModelCatalog::byFolder(state.catalog(), folder)) {
            // A folder from elsewhere joins the model list, as File ▸ Open model folder does.
            state.setCatalog(ModelCatalog::withFolder(state.catalog(), folder));
        }
        state.setModelFolder(folder);
    }
    state.setText(QString::fromStdString(scene.text));
    core::RunSpec run = scene.run;
    const auto& info = state.modelInfo();
    if (info.nLayers > 0) {
        auto& overrides = run.overrides;
        for (auto it = overrides.begin(); it != overrides.end();) {
            if (it->layer >= info.nLayers || it->head >= info.nHeads) {
                notes << QString(
                             "the override %1 names a layer or head this model lacks (%2 layers × "
                             "%3 heads); left out")
                             .arg(QString::fromStdString(it->label()))
                             .arg(info.nLayers)
                             .arg(info.nHeads);
                it = overrides.erase(it);
            } else {
                ++it;
            }
        }
        const auto choices = info.ffnChoices();
        if (std::find(choices.begin(), choices.end(), run.ffn) == choices.end()) {
            notes << QString("this model's feed-forward block cannot run %1; it runs %2")
                         .arg(QString::fromStdString(core::ffnKindName(run.ffn)),
                              QString::fromStdString(core::ffnKindName(state.run().ffn)));
            run.ffn = state.run().ffn;
        }
    }
    state.setRun(run);
    state.setMode(scene.trainedVariant ? VariantMode::TrainedVariant : VariantMode::SameWeights);
    state.setTauScale(scene.tau);
    if (!viewNames().contains(QString::fromStdString(scene.view))) {
        notes << QString("there is no view '%1' (views: %2); the attention map is shown")
                     .arg(QString::fromStdString(scene.view), viewNames().join(", "));
    }
    return notes;
}

void applySceneSelection(const core::Scene& scene, AppState& state) {
    state.setLayer(scene.layer);
    state.setHead(scene.head);
    state.setQueryToken(scene.query);
    const auto result = state.result();
    state.setSlot(result && scene.slot >= result->model.dFf ? -1 : scene.slot);
}

void applySceneMap(const core::Scene& scene, AttentionMapView& map) {
    map.setLogScale(scene.logScale);
    map.setPooling(scene.pooling);
    map.setZoom(scene.zoom);
}

}  // namespace relulens::ui
