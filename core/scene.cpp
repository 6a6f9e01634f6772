#include "core/scene.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/capture_json.h"
#include "core/model_config.h"

namespace relulens::core {

using nlohmann::json;

namespace {

constexpr const char* kSceneKey = "relulens_scene";
constexpr const char* kLessonKey = "relulens_lesson";
constexpr std::uintmax_t kMaxFileBytes = 64ull << 20;

json sceneBody(const Scene& s) {
    json selection = {{"layer", s.layer},
                      {"head", s.head < 0 ? json("mean") : json(s.head)},
                      {"query", s.query},
                      {"slot", s.slot}};
    json map = {{"zoom", nullptr},
                {"pooling", poolingName(s.pooling)},
                {"scale", s.logScale ? "log" : "linear"}};
    if (s.zoom) {
        map["zoom"] = {{"query_begin", s.zoom->queryBegin},
                       {"query_end", s.zoom->queryEnd},
                       {"key_begin", s.zoom->keyBegin},
                       {"key_end", s.zoom->keyEnd}};
    }
    json run = runSpecToJson(s.run);
    // The labels are for people reading the file; reading ignores them.
    return {{"model", s.model},    {"text", s.text},
            {"run", run},          {"mode", s.trainedVariant ? "trained_variant" : "same_weights"},
            {"tau", s.tau},        {"selection", selection},
            {"view", s.view},      {"attention_map", map},
            {"caption", s.caption}};
}

// Each reader takes one field; a wrong one leaves the default and says so.
class FieldReader {
public:
    FieldReader(const json& object, std::vector<std::string>& notes, std::string where)
        : object_(object), notes_(notes), where_(std::move(where)) {}

    template <typename T>
    void read(const char* key, T& into) {
        if (!object_.is_object() || !object_.contains(key) || object_.at(key).is_null()) return;
        try {
            into = object_.at(key).get<T>();
        } catch (const json::exception&) {
            note(std::string("'") + key + "' has the wrong type; using the default");
        }
    }
    const json* find(const char* key) const {
        if (!object_.is_object() || !object_.contains(key) || object_.at(key).is_null())
            return nullptr;
        return &object_.at(key);
    }
    void note(const std::string& message) { notes_.push_back(where_ + message); }

private:
    const json& object_;
    std::vector<std::string>& notes_;
    std::string where_;
};

RunSpec readRun(const json& run, FieldReader& fields) {
    RunSpec out;
    if (!run.is_object()) {
        fields.note("'run' is not an object; using softmax attention and the ReLU FFN");
        return out;
    }
    if (run.contains("attention")) {
        if (auto spec = attentionSpecFromJson(run.at("attention"))) {
            out.attention = *spec;
        } else {
            fields.note("run.attention: " + spec.error() + "; using softmax");
        }
    }
    if (run.contains("ffn")) {
        auto ffn = run.at("ffn").is_string() ? parseFfnKind(run.at("ffn").get<std::string>())
                                             : Result<FfnKind>(Error{"not a name"});
        if (ffn) {
            out.ffn = *ffn;
        } else {
            fields.note("run.ffn: " + ffn.error() + "; using relu");
        }
    }
    if (run.contains("overrides") && run.at("overrides").is_array()) {
        int index = 0;
        for (const auto& o : run.at("overrides")) {
            const std::string where = "run.overrides[" + std::to_string(index++) + "]: ";
            try {
                AttentionOverride entry;
                entry.layer = o.at("layer").get<int64_t>();
                entry.head = o.contains("head") && !o.at("head").is_null()
                                 ? o.at("head").get<int64_t>()
                                 : -1;
                if (entry.layer < 0 || entry.head < -1)
                    throw std::invalid_argument("negative layer or head");
                if (o.contains("ablation")) {
                    const std::string mode = o.at("ablation").get<std::string>();
                    if (mode != "zero" && mode != "uniform")
                        throw std::invalid_argument("ablation '" + mode + "'");
                    if (entry.head < 0) throw std::invalid_argument("an ablation names a head");
                    entry.ablation = mode == "zero" ? Ablation::Zero : Ablation::Uniform;
                } else {
                    auto spec = attentionSpecFromJson(o.at("attention"));
                    if (!spec) throw std::invalid_argument(spec.error());
                    entry.spec = *spec;
                }
                out.overrides.push_back(entry);
            } catch (const std::exception& e) {
                fields.note(where + e.what() + "; left out");
            }
        }
    }
    return out;
}

Scene readSceneBody(const json& j, std::vector<std::string>& notes, const std::string& where) {
    Scene s;
    FieldReader fields(j, notes, where);
    fields.read("model", s.model);
    fields.read("text", s.text);
    if (const json* run = fields.find("run")) s.run = readRun(*run, fields);
    std::string mode = "same_weights";
    fields.read("mode", mode);
    if (mode != "same_weights" && mode != "trained_variant") {
        fields.note("'mode' must be same_weights or trained_variant; using same_weights");
    }
    s.trainedVariant = mode == "trained_variant";
    fields.read("tau", s.tau);
    if (!(s.tau > 0 && s.tau <= 1)) {
        fields.note("'tau' must be in (0, 1]; using 0.1");
        s.tau = 0.1;
    }
    if (const json* selection = fields.find("selection")) {
        FieldReader sel(*selection, notes, where + "selection.");
        sel.read("layer", s.layer);
        if (const json* head = sel.find("head");
            head && head->is_string() && head->get<std::string>() == "mean") {
            s.head = -1;
        } else {
            sel.read("head", s.head);
        }
        sel.read("query", s.query);
        sel.read("slot", s.slot);
        if (s.layer < 0 || s.head < -1 || s.query < -1 || s.slot < -1) {
            sel.note("a negative index; using layer 0, head 0 and no selected token or slot");
            s.layer = 0, s.head = 0, s.query = -1, s.slot = -1;
        }
    }
    fields.read("view", s.view);
    if (const json* map = fields.find("attention_map")) {
        FieldReader m(*map, notes, where + "attention_map.");
        std::string pooling = "max", scale = "linear";
        m.read("pooling", pooling);
        m.read("scale", scale);
        if (pooling != "max" && pooling != "mean")
            m.note("'pooling' must be max or mean; using max");
        if (scale != "linear" && scale != "log")
            m.note("'scale' must be linear or log; using linear");
        s.pooling = pooling == "mean" ? Pooling::Mean : Pooling::Max;
        s.logScale = scale == "log";
        if (const json* zoom = m.find("zoom")) {
            try {
                ZoomRegion z{
                    zoom->at("query_begin").get<int64_t>(), zoom->at("query_end").get<int64_t>(),
                    zoom->at("key_begin").get<int64_t>(), zoom->at("key_end").get<int64_t>()};
                if (z.queryBegin < 0 || z.keyBegin < 0 || z.queryEnd <= z.queryBegin ||
                    z.keyEnd <= z.keyBegin) {
                    throw std::invalid_argument("empty or negative");
                }
                s.zoom = z;
            } catch (const std::exception&) {
                m.note(
                    "'zoom' needs query_begin < query_end and key_begin < key_end, from 0; showing "
                    "the whole map");
            }
        }
    }
    fields.read("caption", s.caption);
    return s;
}

// The version under `key`; a note when the file is newer than this reader.
Result<int> formatVersion(const json& j, const char* key, std::vector<std::string>& notes) {
    if (!j.is_object() || !j.contains(key)) {
        return Error{std::string("not a ReluLens ") +
                     (std::string(key) == kSceneKey ? "scene" : "lesson") + " (no \"" + key +
                     "\" version key)"};
    }
    if (!j.at(key).is_number_integer() || j.at(key).get<int>() < 1) {
        return Error{std::string("\"") + key + "\" must be a version number from 1"};
    }
    const int version = j.at(key).get<int>();
    if (version > kSceneFormatVersion) {
        notes.push_back("written by a newer ReluLens (format " + std::to_string(version) +
                        ", this one reads " + std::to_string(kSceneFormatVersion) +
                        "); what it added is ignored");
    }
    return version;
}

Result<json> readJsonFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Error{path + ": cannot open"};
    in.seekg(0, std::ios::end);
    if (std::uintmax_t(in.tellg()) > kMaxFileBytes)
        return Error{path + ": larger than 64 MB; not a scene"};
    in.seekg(0);
    std::stringstream bytes;
    bytes << in.rdbuf();
    try {
        return json::parse(bytes.str());
    } catch (const json::exception& e) {
        return Error{path + ": not valid JSON (" + e.what() + ")"};
    }
}

}  // namespace

json sceneToJson(const Scene& scene) {
    json body = sceneBody(scene);
    json out = {{kSceneKey, kSceneFormatVersion}};
    out.update(body);
    return out;
}

json lessonToJson(const Lesson& lesson) {
    json steps = json::array();
    for (const auto& s : lesson.steps) steps.push_back(sceneBody(s));
    return {{kLessonKey, kSceneFormatVersion}, {"title", lesson.title}, {"steps", steps}};
}

Result<Read<Scene>> sceneFromJson(const json& j) {
    Read<Scene> out;
    auto version = formatVersion(j, kSceneKey, out.notes);
    if (!version) return Error{version.error()};
    out.value = readSceneBody(j, out.notes, "");
    return out;
}

Result<Read<Lesson>> lessonFromJson(const json& j) {
    Read<Lesson> out;
    auto version = formatVersion(j, kLessonKey, out.notes);
    if (!version) return Error{version.error()};
    FieldReader fields(j, out.notes, "");
    fields.read("title", out.value.title);
    const json* steps = fields.find("steps");
    if (!steps || !steps->is_array() || steps->empty())
        return Error{"a lesson needs a non-empty \"steps\" list"};
    for (size_t i = 0; i < steps->size(); ++i) {
        const json& step = steps->at(i);
        const std::string where = "step " + std::to_string(i + 1) + ": ";
        if (!step.is_object()) {
            out.notes.push_back(where + "not an object; left out");
            continue;
        }
        out.value.steps.push_back(readSceneBody(step, out.notes, where));
    }
    if (out.value.steps.empty()) return Error{"none of the lesson's steps could be read"};
    return out;
}

Result<Read<Scene>> readSceneFile(const std::string& path) {
    auto j = readJsonFile(path);
    if (!j) return Error{j.error()};
    auto scene = sceneFromJson(*j);
    if (!scene) return Error{path + ": " + scene.error()};
    return scene;
}

Result<Read<Lesson>> readLessonFile(const std::string& path) {
    auto j = readJsonFile(path);
    if (!j) return Error{j.error()};
    auto lesson = lessonFromJson(*j);
    if (!lesson) return Error{path + ": " + lesson.error()};
    return lesson;
}

Status writeSceneFile(const std::string& path, const Scene& scene) {
    return writeTextAtomically(path, sceneToJson(scene).dump(2) + "\n");
}

Status writeLessonFile(const std::string& path, const Lesson& lesson) {
    return writeTextAtomically(path, lessonToJson(lesson).dump(2) + "\n");
}

}  // namespace relulens::core
