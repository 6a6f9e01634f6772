// A scene is everything needed to put the same picture on screen again: the model, the text,
// the variants with their per-layer and per-head overrides, the selection, the view and how it
// is zoomed and coloured. A lesson is an ordered list of scenes, each with a caption. Both are
// small versioned JSON files (`.relulens`, documented in README.md); reading one keeps every
// field it can and says which it could not.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/attention_maps.h"
#include "core/error.h"
#include "core/variants.h"

namespace relulens::core {

// Written as "relulens_scene" / "relulens_lesson". Version 1 is the first; a reader of version
// N reads every earlier file (a field an older file lacks takes its default) and reads the
// fields it knows of a later one.
constexpr int kSceneFormatVersion = 1;

// Rows [queryBegin, queryEnd) and keys [keyBegin, keyEnd) of the attention map.
struct ZoomRegion {
    int64_t queryBegin = 0, queryEnd = 0, keyBegin = 0, keyEnd = 0;
    bool operator==(const ZoomRegion& o) const {
        return queryBegin == o.queryBegin && queryEnd == o.queryEnd && keyBegin == o.keyBegin &&
               keyEnd == o.keyEnd;
    }
};

struct Scene {
    // A bundled model's name ("softmax"), or a model folder: absolute, or relative to the
    // scene file's folder (so that a folder travelling with the scene is found).
    std::string model;
    std::string text;
    RunSpec run;
    bool trainedVariant = false;  // "trained variant" mode: the sibling trained with the run
    double tau = 0.1;             // the near-zero threshold of the sparsity views, × 1/n_i
    int layer = 0;
    int head = 0;    // -1: the mean of the layer's heads
    int query = -1;  // the selected token (-1: none)
    int slot = -1;   // the selected memory slot (-1: none)
    std::string view = "attention";
    std::optional<ZoomRegion> zoom;  // unset: the whole map
    Pooling pooling = Pooling::Max;
    bool logScale = false;
    std::string caption;  // a lesson step's caption (empty in a lone scene)
};

struct Lesson {
    std::string title;
    std::vector<Scene> steps;
};

// What reading gave, and a sentence for each field that was unreadable and took its default.
template <typename T>
struct Read {
    T value;
    std::vector<std::string> notes;
};

nlohmann::json sceneToJson(const Scene& scene);
nlohmann::json lessonToJson(const Lesson& lesson);
// An error only when the file is not a scene at all (not JSON, not an object, no
// "relulens_scene" key); anything else that is wrong becomes a note.
Result<Read<Scene>> sceneFromJson(const nlohmann::json& json);
Result<Read<Lesson>> lessonFromJson(const nlohmann::json& json);

Result<Read<Scene>> readSceneFile(const std::string& path);
Result<Read<Lesson>> readLessonFile(const std::string& path);
Status writeSceneFile(const std::string& path, const Scene& scene);
Status writeLessonFile(const std::string& path, const Lesson& lesson);

}  // namespace relulens::core
