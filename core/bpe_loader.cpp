// Reads a Hugging Face tokenizer.json (and tokenizer_config.json) into the byte-level BPE model
// that bpe_tokenizer.cpp encodes with. Every part is checked first: whatever the encoder does not
// implement is refused with one line naming the file and what it found.
#include "core/bpe_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/bpe_model.h"
#include "core/unicode_nfc.h"

namespace relulens::core {

using namespace bpe_detail;

namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Patterns

// A literal string as a PCRE2 pattern.
std::string escapedLiteral(const std::string& text) {
    std::string out;
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x80 && !std::isalnum(u)) out += '\\';
        out += c;
    }
    return out;
}

// GPT-2's pattern, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Rust regex's Unicode \w, which added tokens' single_word checks against.
constexpr const char* kWordCharPattern = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";

// ---------------------------------------------------------------------------------------------
// The parts of tokenizer.json

Status readJson(const std::string& path, json& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Error{"cannot read " + path};
    try {
        out = json::parse(in);
    } catch (const json::exception& e) {
        return Error{path + " is not valid JSON: " + e.what()};
    }
    return {};
}

std::string typeOf(const json& j) {
    if (j.is_object() && j.contains("type") && j["type"].is_string()) {
        return j["type"].get<std::string>();
    }
    return j.is_null() ? "none" : "(no type)";
}

bool flag(const json& j, const char* key, bool fallback) {
    const auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// An option that must be absent, null or empty.
bool unset(const json& model, const char* key) {
    const auto it = model.find(key);
    return it == model.end() || it->is_null() ||
           (it->is_string() && it->get<std::string>().empty());
}

// What a tokenizer.json asks of the pipeline, collected while checking it.
struct Pipeline {
    bool nfc = false;
    std::vector<SplitStep> splits;
    bool byteLevel = false, addPrefixSpace = false, useRegex = true;
    int64_t templateBos = -1;
    bool sawTemplate = false;
};

Status readNormalizer(const json& j, Pipeline& p) {
    if (j.is_null()) return {};
    const std::string type = typeOf(j);
    if (type == "NFC") {
        if (!Nfc::instance().available()) return Error{"normalizer 'NFC': ICU has no NFC data"};
        p.nfc = true;
        return {};
    }
    if (type == "Sequence" && j.contains("normalizers") && j["normalizers"].is_array()) {
        for (const json& inner : j["normalizers"]) {
            if (Status s = readNormalizer(inner, p); !s) return s;
        }
        return {};
    }
    return Error{"normalizer '" + type + "' is not supported (only NFC or none)"};
}

Status readPreTokenizer(const json& j, Pipeline& p) {
    const std::string type = typeOf(j);
    if (type == "Sequence" && j.contains("pretokenizers") && j["pretokenizers"].is_array()) {
        for (const json& inner : j["pretokenizers"]) {
            if (Status s = readPreTokenizer(inner, p); !s) return s;
        }
        return {};
    }
    if (p.byteLevel) {
        return Error{"pre-tokenizer '" + type + "' after ByteLevel is not supported"};
    }
    if (type == "ByteLevel") {
        if (!j.contains("add_prefix_space") || !j["add_prefix_space"].is_boolean()) {
            return Error{"ByteLevel pre-tokenizer without add_prefix_space"};
        }
        p.byteLevel = true;
        p.addPrefixSpace = j["add_prefix_space"].get<bool>();
        p.useRegex = flag(j, "use_regex", true);
        return {};  // trim_offsets only trims the Rust crate's offsets
    }
    if (type == "Digits") {
        const bool individual = flag(j, "individual_digits", false);
        Result<std::shared_ptr<const Regex>> regex =
            Regex::compile(individual ? R"(\p{N})" : R"(\p{N}+)");
        if (!regex) return Error{regex.error()};
        p.splits.push_back({*regex, Behavior::Isolated, false});
        return {};
    }
    if (type == "Split") {
        const json& pattern = j.value("pattern", json());
        std::string source;
        if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
            source = pattern["Regex"].get<std::string>();
        } else if (pattern.contains("String") && pattern["String"].is_string()) {
            source = escapedLiteral(pattern["String"].get<std::string>());
        } else {
            return Error{"Split pre-tokenizer without a Regex or String pattern"};
        }
        const std::string behavior = j.value("behavior", std::string("(none)"));
        static const std::pair<const char*, Behavior> kBehaviors[] = {
            {"Removed", Behavior::Removed},
            {"Isolated", Behavior::Isolated},
            {"MergedWithPrevious", Behavior::MergedWithPrevious},
            {"MergedWithNext", Behavior::MergedWithNext},
            {"Contiguous", Behavior::Contiguous},
        };
        const auto known = std::find_if(std::begin(kBehaviors), std::end(kBehaviors),
                                        [&](const auto& b) { return behavior == b.first; });
        if (known == std::end(kBehaviors)) {
            return Error{"Split behavior '" + behavior + "' is not supported"};
        }
        Result<std::shared_ptr<const Regex>> regex = Regex::compile(source);
        if (!regex) return Error{"Split pre-tokenizer: " + regex.error()};
        p.splits.push_back({*regex, known->second, flag(j, "invert", false)});
        return {};
    }
    return Error{"pre-tokenizer '" + type +
                 "' is not supported (ByteLevel, Split, Digits or a Sequence of them)"};
}

// "[CLS] $A [SEP]" for messages.
std::string describeTemplate(const json& single) {
    std::string out;
    for (const json& item : single) {
        if (!out.empty()) out += ' ';
        if (item.contains("SpecialToken")) {
            out += item["SpecialToken"].value("id", std::string("?"));
        } else if (item.contains("Sequence")) {
            out += "$" + item["Sequence"].value("id", std::string("?"));
        } else {
            out += "?";
        }
    }
    return out;
}

Status readPostProcessor(const json& j, Pipeline& p) {
    if (j.is_null()) return {};
    const std::string type = typeOf(j);
    if (type == "ByteLevel") return {};  // trims offsets only
    if (type == "Sequence" && j.contains("processors") && j["processors"].is_array()) {
        for (const json& inner : j["processors"]) {
            if (Status s = readPostProcessor(inner, p); !s) return s;
        }
        return {};
    }
    if (type != "TemplateProcessing") {
        return Error{"post-processor '" + type +
                     "' is not supported (TemplateProcessing, ByteLevel or a Sequence of them)"};
    }
    const json single = j.value("single", json::array());
    const std::string described = describeTemplate(single);
    const auto isA = [](const json& item) {
        return item.contains("Sequence") && item["Sequence"].value("id", std::string()) == "A";
    };
    if (p.sawTemplate || !single.is_array() || single.empty() || single.size() > 2 ||
        !isA(single.back()) || (single.size() == 2 && !single[0].contains("SpecialToken"))) {
        return Error{"post-processor template '" + described +
                     "' is not supported (only an optional token before $A)"};
    }
    p.sawTemplate = true;
    if (single.size() == 1) return {};
    const std::string name = single[0]["SpecialToken"].value("id", std::string());
    const json specials = j.value("special_tokens", json::object());
    const auto it = specials.find(name);
    if (it == specials.end() || !it->contains("ids") || !(*it)["ids"].is_array() ||
        (*it)["ids"].size() != 1 || !(*it)["ids"][0].is_number_integer()) {
        return Error{"post-processor template '" + described + "': '" + name +
                     "' must stand for exactly one id"};
    }
    p.templateBos = (*it)["ids"][0].get<int64_t>();
    return {};
}

Status readDecoder(const json& j) {
    const std::string type = typeOf(j);
    if (type == "ByteLevel") return {};
    if (type == "Sequence" && j.contains("decoders") && j["decoders"].is_array() &&
        !j["decoders"].empty()) {
        for (const json& inner : j["decoders"]) {
            if (Status s = readDecoder(inner); !s) return s;
        }
        return {};
    }
    return Error{"decoder '" + type + "' is not supported (only ByteLevel)"};
}

// The content of a bos_token entry of tokenizer_config.json: a string or an AddedToken object.
std::string tokenContent(const json& j) {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_object() && j.contains("content") && j["content"].is_string()) {
        return j["content"].get<std::string>();
    }
    return {};
}

// The model's type and the BPE options the encoder does not honour.
Status checkModel(const json& root) {
    if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
        return Error{"no model"};
    }
    const json& m = root["model"];
    const std::string modelType = m.value("type", m.contains("merges") ? "BPE" : "(none)");
    if (modelType != "BPE") {
        return Error{"model type '" + modelType + "' is not supported (only BPE)"};
    }
    if (m.contains("dropout") && !m["dropout"].is_null() &&
        !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0)) {
        return Error{"BPE dropout " + m["dropout"].dump() + " is not supported"};
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (!unset(m, key)) return Error{std::string("BPE ") + key + " is not supported"};
    }
    if (flag(m, "byte_fallback", false)) return Error{"BPE byte_fallback is not supported"};
    if (!m.contains("vocab") || !m["vocab"].is_object()) {
        return Error{"the BPE model has no vocab"};
    }
    if (!m.contains("merges") || !m["merges"].is_array()) {
        return Error{"the BPE model has no merges"};
    }
    return {};
}

// The normalizer, pre-tokenizer, post-processor and decoder.
Status readPipeline(const json& root, Pipeline& p) {
    if (Status s = readNormalizer(root.value("normalizer", json()), p); !s) return s;
    if (Status s = readPreTokenizer(root.value("pre_tokenizer", json()), p); !s) return s;
    if (!p.byteLevel) {
        return Error{"pre-tokenizer '" + typeOf(root.value("pre_tokenizer", json())) +
                     "' has no ByteLevel step: not a byte-level BPE tokenizer"};
    }
    if (Status s = readPostProcessor(root.value("post_processor", json()), p); !s) return s;
    return readDecoder(root.value("decoder", json()));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Filling the model

void BpeTokenizer::Model::place(int64_t id, const std::string& piece) {
    if (size_t(id) >= pieces.size()) {
        pieces.resize(size_t(id) + 1);
        known.resize(size_t(id) + 1, 0);
    }
    pieces[size_t(id)] = piece;
    known[size_t(id)] = 1;
    size = std::max(size, id + 1);
}

Status BpeTokenizer::Model::readVocabulary(const json& m) {
    vocab.reserve(m["vocab"].size());
    std::string bytes;
    for (const auto& [piece, value] : m["vocab"].items()) {
        if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
            value.get<int64_t>() >= kMaxId) {
            return Error{"vocab entry '" + piece + "' has id " + value.dump()};
        }
        const auto id = int32_t(value.get<int64_t>());
        vocab[piece] = id;
        if (byteLevelBytes(piece, bytes)) rawVocab[bytes] = id;
        place(id, piece);
    }
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
        const auto it = vocab.find(m["unk_token"].get<std::string>());
        if (it == vocab.end()) {
            return Error{"unk_token '" + m["unk_token"].get<std::string>() +
                         "' is not in the vocabulary"};
        }
        unkId = it->second;
    }
    for (int b = 0; b < 256; ++b) {
        const auto it = vocab.find(alphabet().charOf[size_t(b)]);
        byteIds[size_t(b)] = it == vocab.end() ? -1 : it->second;
    }
    return {};
}

// Merges, as "a b" strings or (tokenizers >= 0.20) ["a", "b"] pairs. A repeated pair takes its
// last rank, as in the Rust crate's map.
Status BpeTokenizer::Model::readMerges(const json& list) {
    merges.reserve(list.size());
    for (size_t rank = 0; rank < list.size(); ++rank) {
        const json& entry = list[rank];
        std::string left, right;
        if (entry.is_string()) {
            const std::string line = entry.get<std::string>();
            const size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
                return Error{"merge " + std::to_string(rank) + " '" + line + "' is not two tokens"};
            }
            left = line.substr(0, space);
            right = line.substr(space + 1);
        } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
                   entry[1].is_string()) {
            left = entry[0].get<std::string>();
            right = entry[1].get<std::string>();
        } else {
            return Error{"merge " + std::to_string(rank) + " " + entry.dump() +
                         " is not a pair of tokens"};
        }
        const auto a = vocab.find(left), b = vocab.find(right), ab = vocab.find(left + right);
        if (a == vocab.end() || b == vocab.end() || ab == vocab.end()) {
            return Error{"merge " + std::to_string(rank) + " ('" + left + "', '" + right +
                         "') names a token the vocabulary lacks"};
        }
        merges[pairKey(a->second, b->second)] = uint64_t(rank) << 32 | uint32_t(ab->second);
    }
    return {};
}

Status BpeTokenizer::Model::readAddedTokens(const json& list) {
    if (!list.is_array()) return Error{"added_tokens is not a list"};
    for (const json& entry : list) {
        if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() ||
            !entry.contains("id") || !entry["id"].is_number_integer() ||
            entry["id"].get<int64_t>() < 0 || entry["id"].get<int64_t>() >= kMaxId) {
            return Error{"added token " + entry.dump() + " needs a content and an id"};
        }
        AddedToken token;
        token.id = int32_t(entry["id"].get<int64_t>());
        token.content = entry["content"].get<std::string>();
        if (token.content.empty()) continue;  // ignored by the Rust crate too
        token.special = flag(entry, "special", false);
        token.singleWord = flag(entry, "single_word", false);
        token.lstrip = flag(entry, "lstrip", false);
        token.rstrip = flag(entry, "rstrip", false);
        token.normalized = flag(entry, "normalized", !token.special);
        token.pattern =
            token.normalized && nfc ? Nfc::instance().normalized(token.content) : token.content;
        if (!isValidUtf8(token.pattern)) {
            return Error{"added token " + entry.dump() + " is not UTF-8"};
        }
        if (token.singleWord && !wordChar) {
            Result<std::shared_ptr<const Regex>> regex = Regex::compile(kWordCharPattern);
            if (!regex) return Error{"single_word: " + regex.error()};
            wordChar = *regex;
        }
        place(token.id, token.content);
        addedIds[token.content] = token.id;
        added.push_back(std::move(token));
    }
    special.assign(size_t(size), 0);
    for (const AddedToken& token : added) {
        if (token.special) special[size_t(token.id)] = 1;
    }
    for (size_t k = 0; k < added.size(); ++k) {
        AddedMatcher& matcher = added[k].normalized ? normalizedMatcher : rawMatcher;
        matcher.byFirstByte[static_cast<unsigned char>(added[k].pattern[0])].push_back(int(k));
        matcher.empty = false;
    }
    for (AddedMatcher* matcher : {&rawMatcher, &normalizedMatcher}) {
        for (std::vector<int>& bucket : matcher->byFirstByte) {
            std::stable_sort(bucket.begin(), bucket.end(), [&](int x, int y) {
                return added[size_t(x)].pattern.size() > added[size_t(y)].pattern.size();
            });
        }
    }
    return {};
}

// What the decoder writes for each id: the bytes a byte-level string stands for, or the string
// itself when it is not one (the Rust ByteLevel decoder's rule, added tokens too).
void BpeTokenizer::Model::prepareDecoding() {
    decoded.resize(pieces.size());
    for (size_t id = 0; id < pieces.size(); ++id) {
        if (!byteLevelBytes(pieces[id], decoded[id])) decoded[id] = pieces[id];
    }
}

// tokenizer_config.json's add_bos_token, with its bos_token, overrides the template's BOS.
Status BpeTokenizer::Model::readConfig(const std::string& path) {
    json config;
    if (Status s = readJson(path, config); !s) return s;
    const std::string where = path + ": ";
    if (!config.is_object() || !config.contains("add_bos_token") ||
        !config["add_bos_token"].is_boolean()) {
        return {};
    }
    if (!config["add_bos_token"].get<bool>()) {
        bos = -1;
        return {};
    }
    const std::string name = tokenContent(config.value("bos_token", json()));
    if (name.empty()) {
        if (bos < 0) return Error{where + "add_bos_token is true but no bos_token is named"};
        return {};
    }
    const auto asAdded = addedIds.find(name);
    const auto inVocab = vocab.find(name);
    if (asAdded != addedIds.end()) {
        bos = asAdded->second;
    } else if (inVocab != vocab.end()) {
        bos = inVocab->second;
    } else {
        return Error{where + "bos_token '" + name + "' is not in the vocabulary"};
    }
    return {};
}

// ---------------------------------------------------------------------------------------------
// load

Result<BpeTokenizer> BpeTokenizer::load(const std::string& tokenizerJson,
                                        const std::string& tokenizerConfig) {
    json root;
    if (Status s = readJson(tokenizerJson, root); !s) return Error{s.error()};
    const std::string where = tokenizerJson + ": ";
    const auto refuse = [&](const std::string& what) { return Error{where + what}; };
    Pipeline pipeline;
    if (Status s = checkModel(root); !s) return refuse(s.error());
    if (Status s = readPipeline(root, pipeline); !s) return refuse(s.error());

    const json& m = root["model"];
    auto model = std::make_shared<Model>();
    Model& t = *model;
    t.nfc = pipeline.nfc;
    t.splits = pipeline.splits;
    t.addPrefixSpace = pipeline.addPrefixSpace;
    if (pipeline.useRegex) {
        Result<std::shared_ptr<const Regex>> regex = Regex::compile(kGpt2Pattern);
        if (!regex) return refuse(regex.error());
        t.byteLevelRegex = *regex;
    }
    t.ignoreMerges = flag(m, "ignore_merges", false);
    t.fuseUnk = flag(m, "fuse_unk", false);
    if (Status s = t.readVocabulary(m); !s) return refuse(s.error());
    if (Status s = t.readMerges(m["merges"]); !s) return refuse(s.error());
    if (Status s = t.readAddedTokens(root.value("added_tokens", json::array())); !s) {
        return refuse(s.error());
    }
    t.prepareDecoding();

    // BOS: the template's, unless tokenizer_config.json says add_bos_token.
    t.bos = pipeline.templateBos;
    if (t.bos >= t.size || (t.bos >= 0 && !t.known[size_t(t.bos)])) {
        return refuse("the post-processor's template token id " + std::to_string(t.bos) +
                      " is not in the vocabulary");
    }
    if (!tokenizerConfig.empty()) {
        if (Status s = t.readConfig(tokenizerConfig); !s) return Error{s.error()};
    }

    BpeTokenizer tokenizer;
    tokenizer.model_ = std::move(model);
    tokenizer.cache_ = std::make_shared<WordCache>();
    return tokenizer;
}
}  // namespace relulens::core
