// A model's chat template: the Jinja program in its tokenizer files that turns a conversation into the
// prompt text the model was trained on. Rendered the way transformers' apply_chat_template renders it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace coli::text {

namespace jinja {
class Template;
}

struct ChatMessage {
    std::string role;  // "system", "user", "assistant", "tool", ...
    std::string content;
};

class ChatTemplate {
public:
    // Reads the model's template: chat_template.jinja if present, else tokenizer_config.json's
    // "chat_template" (a string, or a list of {name, template} where "default" is used), else
    // chat_template.json. The special tokens (bos_token, eos_token, ...) come from tokenizer_config.json.
    // A missing template, or one outside the supported Jinja subset, is a coli::Error naming the file.
    static ChatTemplate load(const std::filesystem::path& model_dir);

    // A template from its source text. `special_tokens` maps names like "bos_token" to their text
    // (strings, or a list of strings for additional_special_tokens); `origin` names it in errors.
    static ChatTemplate from_source(const std::string& source, nlohmann::ordered_json special_tokens = {},
                                    const std::string& origin = "chat template");

    // Renders a conversation. The template sees what transformers passes: messages, add_generation_prompt,
    // tools=None, documents=None, the special tokens, then every key of `extra` (which may override them:
    // tools, enable_thinking, ...). Key order inside `extra` is kept, as tojson prints it.
    std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                       const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

    // Same, with messages as JSON objects (for tool calls, reasoning_content, multi-part content, ...).
    std::string render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                            const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

    const std::string& source() const { return source_; }
    const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

private:
    std::string source_;
    std::string origin_;
    nlohmann::ordered_json special_tokens_;
    std::shared_ptr<const jinja::Template> template_;
};

}  // namespace coli::text
