// Between a scene (core/scene.h) and the window: the scene the state and its views show, and
// the state set from a scene. In memory a scene names its model by bundled name or by an
// absolute folder; the file form may name the folder relative to the file's own folder.
#pragma once
#include <QString>
#include <QStringList>

#include "core/scene.h"

namespace relulens::ui {

class AppState;
class AttentionMapView;

// The file form: a model folder inside `fileDir` becomes relative to it.
core::Scene sceneForFile(core::Scene scene, const QString& fileDir);
// The memory form: a relative model folder is resolved against `fileDir`.
core::Scene sceneFromFile(core::Scene scene, const QString& fileDir);

// The state's model (bundled name or absolute folder), text, variants, τ and selection.
// The view, zoom, pooling and colour scale are the window's to add.
core::Scene sceneFromState(const AppState& state);
void addMapView(core::Scene& scene, const AttentionMapView& map);

// Sets the state's model (when the scene's is found), text, variants with the overrides the
// model has, mode and τ. Returns a sentence for each part that could not be applied; the state
// keeps what it had for those.
QStringList applySceneInputs(const core::Scene& scene, AppState& state);
// Layer, head, selected token and slot (clamped to the result the state shows).
void applySceneSelection(const core::Scene& scene, AppState& state);
// Zoom region, pooling and colour scale of the attention map.
void applySceneMap(const core::Scene& scene, AttentionMapView& map);
// The folder a scene's model names, or empty (with `problem` said) when there is none.
QString sceneModelFolder(const core::Scene& scene, const AppState& state, QString* problem);

}  // namespace relulens::ui
