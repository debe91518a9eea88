// Reads HF tokenizers' tokenizer.json into a Tokenizer. Every component type and option is checked: the
// ones that are implemented are read, the others are a coli::Error naming them (a tokenizer that
// silently ignores a normalizer or a post-processor produces wrong ids without any sign).
#include "core/error.h"
#include "io/json.h"
#include "text/byte_level.h"
#include "text/tokenizer_loader.h"

namespace coli::text {

namespace {

using nlohmann::json;

class JsonReader {
public:
    explicit JsonReader(std::string_view what) : what_(what) {}

    [[noreturn]] void unsupported(std::string_view component, std::string_view detail) const {
        fail("{}: {} {} is not supported by colibri's tokenizer", what_, component, detail);
    }

    const json& member(const json& obj, std::string_view key, std::string_view where) const {
        auto it = obj.find(key);
        if (it == obj.end()) fail("{}: {} has no \"{}\"", what_, where, key);
        return *it;
    }

    std::string type_of(const json& obj, std::string_view where) const {
        if (!obj.is_object()) fail("{}: {} is not an object", what_, where);
        const json& t = member(obj, "type", where);
        if (!t.is_string()) fail("{}: {} \"type\" is not a string", what_, where);
        return t.get<std::string>();
    }

    bool flag(const json& obj, std::string_view key, bool fallback) const {
        auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) return fallback;
        if (!it->is_boolean()) fail("{}: \"{}\" is not a boolean", what_, key);
        return it->get<bool>();
    }

    std::string string_of(const json& v, std::string_view where) const {
        if (!v.is_string()) fail("{}: {} is not a string", what_, where);
        return v.get<std::string>();
    }

    // A Split or Replace pattern: {"Regex": "..."} or {"String": "..."}.
    std::shared_ptr<const Regex> pattern_regex(const json& pattern, std::string_view where) const {
        if (pattern.contains("Regex")) {
            try {
                return std::make_shared<Regex>(string_of(pattern["Regex"], where));
            } catch (const Error& e) {
                fail("{}: {}: {}", what_, where, e.what());
            }
        }
        if (pattern.contains("String"))
            return std::make_shared<Regex>(escape_literal(string_of(pattern["String"], where)));
        fail("{}: {} pattern is neither Regex nor String", what_, where);
    }

    static std::string escape_literal(std::string_view s) {
        std::string out;
        for (char c : s) {
            bool special = std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos;
            if (special) out += '\\';
            out += c;
        }
        return out;
    }

    std::string_view what() const { return what_; }

private:
    std::string_view what_;
};

SplitBehavior split_behavior(const JsonReader& r, const std::string& name) {
    if (name == "Removed") return SplitBehavior::kRemoved;
    if (name == "Isolated") return SplitBehavior::kIsolated;
    if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (name == "Contiguous") return SplitBehavior::kContiguous;
    r.unsupported("Split behavior", name);
}

void read_normalizer(const JsonReader& r, const json& n, std::vector<NormalizerStep>& out) {
    if (n.is_null()) return;
    std::string type = r.type_of(n, "normalizer");
    if (type == "Sequence") {
        for (const json& child : r.member(n, "normalizers", "Sequence normalizer"))
            read_normalizer(r, child, out);
    } else if (type == "NFC") {
        out.emplace_back().kind = NormalizerStep::Kind::kNfc;
    } else if (type == "Prepend") {
        NormalizerStep& step = out.emplace_back();
        step.kind = NormalizerStep::Kind::kPrepend;
        step.text = r.string_of(r.member(n, "prepend", "Prepend"), "prepend");
    } else if (type == "Replace") {
        NormalizerStep step;
        step.kind = NormalizerStep::Kind::kReplace;
        step.text = r.string_of(r.member(n, "content", "Replace"), "content");
        const json& pattern = r.member(n, "pattern", "Replace normalizer");
        if (pattern.contains("String"))
            step.literal = r.string_of(pattern["String"], "Replace pattern");
        else
            step.regex = r.pattern_regex(pattern, "Replace normalizer");
        if (!step.regex && step.literal.empty()) r.unsupported("normalizer", "Replace with an empty pattern");
        out.push_back(std::move(step));
    } else {
        r.unsupported("normalizer", type);
    }
}

// Reads the pre-tokenizer; returns whether a ByteLevel step was seen (it must come last).
void read_pre_tokenizer(const JsonReader& r, const json& p, std::vector<SplitStep>& out, bool& byte_level) {
    if (p.is_null()) return;
    std::string type = r.type_of(p, "pre_tokenizer");
    if (byte_level) r.unsupported("pre_tokenizer", type + " after ByteLevel");
    if (type == "Sequence") {
        for (const json& child : r.member(p, "pretokenizers", "Sequence pre_tokenizer"))
            read_pre_tokenizer(r, child, out, byte_level);
    } else if (type == "Split") {
        SplitStep step;
        step.regex = r.pattern_regex(r.member(p, "pattern", "Split"), "Split pre_tokenizer");
        step.behavior = split_behavior(r, r.string_of(r.member(p, "behavior", "Split"), "Split behavior"));
        step.invert = r.flag(p, "invert", false);
        out.push_back(std::move(step));
    } else if (type == "ByteLevel") {
        if (r.flag(p, "add_prefix_space", true))
            r.unsupported("ByteLevel pre_tokenizer", "add_prefix_space=true");
        if (r.flag(p, "use_regex", true)) {
            SplitStep step;
            step.regex = std::make_shared<Regex>(kGpt2Pattern);
            out.push_back(std::move(step));
        }
        byte_level = true;
    } else if (type == "Digits") {
        SplitStep step;
        step.kind = SplitStep::Kind::kAsciiDigits;
        step.behavior =
            r.flag(p, "individual_digits", false) ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
        out.push_back(std::move(step));
    } else {
        r.unsupported("pre_tokenizer", type);
    }
}

// Only decoders that map every token to bytes on its own are allowed (streaming decode relies on it).
void read_decoder(const JsonReader& r, const json& d) {
    if (d.is_null()) r.unsupported("decoder", "null (a byte-level vocab needs the ByteLevel decoder)");
    std::string type = r.type_of(d, "decoder");
    if (type == "Sequence") {
        const json& children = r.member(d, "decoders", "Sequence decoder");
        if (children.size() != 1) r.unsupported("decoder", "Sequence other than [ByteLevel]");
        read_decoder(r, children[0]);
    } else if (type != "ByteLevel") {
        r.unsupported("decoder", type);
    }
}

void read_post_processor(const JsonReader& r, const json& p, const Tokenizer& t, std::vector<int32_t>& prefix,
                         std::vector<int32_t>& suffix) {
    if (p.is_null()) return;
    std::string type = r.type_of(p, "post_processor");
    if (type == "ByteLevel") return;  // only adjusts offsets
    if (type == "Sequence") {
        for (const json& child : r.member(p, "processors", "Sequence post_processor"))
            read_post_processor(r, child, t, prefix, suffix);
        return;
    }
    if (type != "TemplateProcessing") r.unsupported("post_processor", type);
    const json& specials = r.member(p, "special_tokens", "TemplateProcessing");
    bool seen_sequence = false;
    for (const json& piece : r.member(p, "single", "TemplateProcessing")) {
        if (piece.contains("Sequence")) {
            std::string id = r.string_of(piece["Sequence"]["id"], "TemplateProcessing Sequence id");
            if (id != "A" || seen_sequence) r.unsupported("TemplateProcessing single", "sequence " + id);
            seen_sequence = true;
            continue;
        }
        if (!piece.contains("SpecialToken")) r.unsupported("TemplateProcessing piece", piece.dump());
        std::string name = r.string_of(piece["SpecialToken"]["id"], "TemplateProcessing SpecialToken id");
        const json& entry = r.member(specials, name, "TemplateProcessing special_tokens");
        for (const json& id : r.member(entry, "ids", "TemplateProcessing special token"))
            (seen_sequence ? suffix : prefix).push_back(id.get<int32_t>());
    }
    for (int32_t id : prefix)
        check(id >= 0 && id < t.vocab_size(), "{}: TemplateProcessing id {} is outside the vocabulary",
              r.what(), id);
    for (int32_t id : suffix)
        check(id >= 0 && id < t.vocab_size(), "{}: TemplateProcessing id {} is outside the vocabulary",
              r.what(), id);
}

bool null_or_empty(const json& obj, std::string_view key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty());
}

}  // namespace

void TokenizerLoader::add_token(Tokenizer& t, const AddedToken& token) {
    check(token.id >= 0, "added token {} has a negative id", token.content);
    if (token.id >= t.vocab_size()) {
        t.id_bytes_.resize(token.id + 1);
        t.special_.resize(token.id + 1);
    }
    // An added token decodes to its content (through the byte-level alphabet when it is written in it,
    // as HF's ByteLevel decoder does).
    auto bytes = byte_level_decode(token.content);
    t.id_bytes_[token.id] = bytes ? *bytes : token.content;
    t.special_[token.id] = token.special;
    t.token_ids_[token.content] = token.id;
    (token.normalized ? t.normalized_added_ : t.raw_added_).add(token);
}

void TokenizerLoader::apply_config(Tokenizer& t, const nlohmann::json* config, std::string_view what) {
    if (!config || !config->is_object()) return;
    auto token_of = [&](std::string_view key) -> std::optional<int32_t> {
        auto it = config->find(key);
        if (it == config->end() || it->is_null()) return std::nullopt;
        std::string content;
        if (it->is_string())
            content = it->get<std::string>();
        else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
            content = (*it)["content"].get<std::string>();
        else
            fail("{}: tokenizer_config \"{}\" is neither a string nor an AddedToken", what, key);
        auto id = t.token_id(content);
        if (!id) fail("{}: tokenizer_config {} {} is not a token", what, key, quote(content));
        return id;
    };
    t.bos_id_ = token_of("bos_token");
    t.eos_id_ = token_of("eos_token");
    auto add_bos = config->find("add_bos_token");
    t.add_bos_ = add_bos != config->end() && add_bos->is_boolean() && add_bos->get<bool>() && t.bos_id_;
}

std::unique_ptr<Tokenizer> TokenizerLoader::from_tokenizer_json(const nlohmann::json& tj,
                                                                const nlohmann::json* config,
                                                                std::string_view what) {
    JsonReader r(what);
    if (!tj.is_object()) fail("{}: not a JSON object", what);
    std::unique_ptr<Tokenizer> t(new Tokenizer());

    for (std::string_view key : {"truncation", "padding"}) {
        auto it = tj.find(key);
        if (it != tj.end() && !it->is_null()) r.unsupported(key, it->dump().substr(0, 80));
    }

    // Model: byte-level BPE.
    const json& model = r.member(tj, "model", "tokenizer.json");
    std::string model_type = model.is_object() && model.contains("type") ? r.type_of(model, "model") : "BPE";
    if (model_type != "BPE") r.unsupported("model", model_type);
    if (auto it = model.find("dropout");
        it != model.end() && !it->is_null() && !(it->is_number() && *it == 0))
        r.unsupported("BPE", "dropout");
    if (r.flag(model, "byte_fallback", false)) r.unsupported("BPE", "byte_fallback=true");
    if (!null_or_empty(model, "continuing_subword_prefix")) r.unsupported("BPE", "continuing_subword_prefix");
    if (!null_or_empty(model, "end_of_word_suffix")) r.unsupported("BPE", "end_of_word_suffix");
    t->bpe_.whole_piece_first = r.flag(model, "ignore_merges", false);

    const json& vocab = r.member(model, "vocab", "BPE model");
    if (!vocab.is_object()) fail("{}: BPE vocab is not an object", what);
    int32_t max_id = -1;
    for (const auto& [token, id_json] : vocab.items()) {
        if (!id_json.is_number_integer()) fail("{}: vocab entry {} has no integer id", what, quote(token));
        max_id = std::max(max_id, id_json.get<int32_t>());
    }
    t->id_bytes_.resize(max_id + 1);
    t->special_.resize(max_id + 1);
    t->bpe_.byte_ids.fill(-1);
    for (const auto& [token, id_json] : vocab.items()) {
        auto id = id_json.get<int32_t>();
        if (id < 0) fail("{}: vocab entry {} has a negative id", what, quote(token));
        t->token_ids_.emplace(token, id);
        // Tokens written entirely in the byte-level alphabet are reachable from bytes; others (specials
        // stored in the vocab) decode to their UTF-8 as HF's ByteLevel decoder does.
        if (auto bytes = byte_level_decode(token)) {
            t->id_bytes_[id] = *bytes;
            t->bpe_.bytes_to_id.insert(*bytes, id);
            if (bytes->size() == 1) t->bpe_.byte_ids[static_cast<uint8_t>((*bytes)[0])] = id;
        } else {
            t->id_bytes_[id] = token;
        }
    }

    const json& merges = r.member(model, "merges", "BPE model");
    int32_t rank = 0;
    for (const json& m : merges) {
        std::string left, right;
        if (m.is_string()) {
            std::string line = m.get<std::string>();
            size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
                fail("{}: merge {} is not two tokens separated by one space", what, quote(line));
            left = line.substr(0, space);
            right = line.substr(space + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            left = m[0].get<std::string>();
            right = m[1].get<std::string>();
        } else {
            fail("{}: merge #{} is neither \"a b\" nor [\"a\", \"b\"]", what, rank);
        }
        auto l = t->token_ids_.find(left), rt = t->token_ids_.find(right),
             merged = t->token_ids_.find(left + right);
        if (l == t->token_ids_.end() || rt == t->token_ids_.end() || merged == t->token_ids_.end())
            fail("{}: merge #{} {} {} uses a token that is not in the vocab", what, rank, quote(left),
                 quote(right));
        t->bpe_.merges.insert(l->second, rt->second, Merge{rank, merged->second});
        ++rank;
    }

    // Added tokens.
    if (auto it = tj.find("added_tokens"); it != tj.end() && !it->is_null()) {
        for (const json& a : *it) {
            AddedToken tok;
            tok.content = r.string_of(r.member(a, "content", "added token"), "added token content");
            tok.id = r.member(a, "id", "added token").get<int32_t>();
            tok.special = r.flag(a, "special", false);
            tok.lstrip = r.flag(a, "lstrip", false);
            tok.rstrip = r.flag(a, "rstrip", false);
            tok.single_word = r.flag(a, "single_word", false);
            tok.normalized = r.flag(a, "normalized", !tok.special);
            add_token(*t, tok);
        }
    }

    if (auto it = tj.find("normalizer"); it != tj.end()) read_normalizer(r, *it, t->normalizer_);
    bool byte_level = false;
    if (auto it = tj.find("pre_tokenizer"); it != tj.end())
        read_pre_tokenizer(r, *it, t->pre_tokenizer_, byte_level);
    if (!byte_level)
        r.unsupported("pre_tokenizer",
                      "without ByteLevel (character-level BPE; colibri supports byte-level BPE)");
    read_decoder(r, tj.contains("decoder") ? tj["decoder"] : json());
    if (auto it = tj.find("post_processor"); it != tj.end())
        read_post_processor(r, *it, *t, t->prefix_ids_, t->suffix_ids_);

    apply_config(*t, config, what);
    return t;
}

}  // namespace coli::text
