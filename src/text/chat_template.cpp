#include "text/chat_template.h"

#include "core/error.h"
#include "io/json.h"
#include "text/jinja_json.h"
#include "text/jinja_template.h"

namespace coli::text {

namespace {

namespace fs = std::filesystem;

// The special-token attributes transformers puts in special_tokens_map (and so in the template's
// variables) when they are set.
constexpr std::string_view kSpecialTokenNames[] = {
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
};

// A token is a string, or an AddedToken object {"content": ..., "lstrip": ..., ...}.
std::optional<std::string> token_text(const nlohmann::json& token) {
    if (token.is_string()) return token.get<std::string>();
    if (token.is_object() && token.contains("content") && token["content"].is_string()) {
        return token["content"].get<std::string>();
    }
    return std::nullopt;
}

nlohmann::ordered_json special_tokens_from(const nlohmann::json& config) {
    nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
    for (std::string_view name : kSpecialTokenNames) {
        auto it = config.find(std::string(name));
        if (it == config.end()) continue;
        if (auto text = token_text(*it)) tokens[std::string(name)] = *text;
    }
    auto extra = config.find("additional_special_tokens");
    if (extra != config.end() && extra->is_array()) {
        nlohmann::ordered_json list = nlohmann::ordered_json::array();
        for (const auto& token : *extra) {
            if (auto text = token_text(token)) list.push_back(*text);
        }
        tokens["additional_special_tokens"] = list;
    }
    return tokens;
}

// tokenizer_config.json's chat_template: a string, or named templates of which "default" is the one.
std::optional<std::string> template_from_config(const nlohmann::json& config, const fs::path& file) {
    auto it = config.find("chat_template");
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    check(it->is_array(), "{}: \"chat_template\" must be a string or a list of named templates",
          file.string());
    std::string names;
    for (const auto& entry : *it) {
        check(entry.is_object() && entry.contains("name") && entry.contains("template") &&
                  entry["name"].is_string() && entry["template"].is_string(),
              "{}: each named chat template needs a \"name\" and a \"template\" string", file.string());
        if (entry["name"] == "default") return entry["template"].get<std::string>();
        names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
    }
    fail("{}: none of the named chat templates ({}) is called \"default\"", file.string(), names);
}

}  // namespace

ChatTemplate ChatTemplate::load(const fs::path& model_dir) {
    fs::path config_file = model_dir / "tokenizer_config.json";
    nlohmann::json config = nlohmann::json::object();
    if (fs::exists(config_file)) config = json_read_file(config_file);

    std::optional<std::string> source;
    fs::path origin;
    if (fs::path jinja_file = model_dir / "chat_template.jinja"; fs::exists(jinja_file)) {
        source = file_read_text(jinja_file);
        origin = jinja_file;
    } else if (auto from_config = template_from_config(config, config_file)) {
        source = std::move(from_config);
        origin = config_file;
    } else if (fs::path json_file = model_dir / "chat_template.json"; fs::exists(json_file)) {
        source = template_from_config(json_read_file(json_file), json_file);
        origin = json_file;
    }
    check(
        source.has_value(),
        "no chat template in {}: looked for chat_template.jinja, \"chat_template\" in tokenizer_config.json, "
        "and chat_template.json",
        model_dir.string());
    return from_source(*source, special_tokens_from(config), origin.string());
}

ChatTemplate ChatTemplate::from_source(const std::string& source, nlohmann::ordered_json special_tokens,
                                       const std::string& origin) {
    ChatTemplate t;
    t.source_ = source;
    t.origin_ = origin;
    t.special_tokens_ =
        special_tokens.is_null() ? nlohmann::ordered_json::object() : std::move(special_tokens);
    check(t.special_tokens_.is_object(), "{}: special tokens must be a JSON object", origin);
    try {
        t.template_ = std::make_shared<const jinja::Template>(source);
    } catch (const Error& e) {
        fail("{}: {}", origin, e.what());
    }
    return t;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
    return render_json(list, add_generation_prompt, extra);
}

std::string ChatTemplate::render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                      const nlohmann::ordered_json& extra) const {
    check(messages.is_array(), "{}: messages must be a JSON array", origin_);
    check(extra.is_null() || extra.is_object(), "{}: extra template variables must be a JSON object",
          origin_);
    jinja::Dict variables;
    auto set = [&](const std::string& name, jinja::Value v) {
        for (auto& [k, existing] : variables) {
            if (k == name) {
                existing = std::move(v);
                return;
            }
        }
        variables.emplace_back(name, std::move(v));
    };
    for (const auto& [name, token] : special_tokens_.items()) set(name, jinja::value_from_json(token));
    set("messages", jinja::value_from_json(messages));
    set("tools", jinja::Value::none());
    set("documents", jinja::Value::none());
    set("add_generation_prompt", jinja::Value(add_generation_prompt));
    if (extra.is_object()) {
        for (const auto& [name, v] : extra.items()) {
            check(name != "messages" && name != "add_generation_prompt",
                  "{}: pass \"{}\" as its own argument, not among the extra variables", origin_, name);
            set(name, jinja::value_from_json(v));
        }
    }
    try {
        return template_->render(variables);
    } catch (const Error& e) {
        fail("{}: {}", origin_, e.what());
    }
}

}  // namespace coli::text
