// OpenAI's chat completion and completion answers: chat.completion / text_completion objects, and their
// streamed chunks ("data: {...}" events ending with "data: [DONE]").
#include <nlohmann/json.hpp>

#include <ctime>

#include "server/api_format.h"

namespace coli::server {

namespace {

using nlohmann::json;

std::string dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse(const json& j) {
    return "data: " + dump(j) + "\n\n";
}

const char* finish_name(FinishReason f) {
    return f == FinishReason::length ? "length" : "stop";  // a cancelled stream has nobody to tell
}

json usage(const GenerateResult& r) {
    return {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", r.completion_tokens},
            {"total_tokens", r.prompt_tokens + r.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

class OpenAIFormat : public ApiFormat {
public:
    OpenAIFormat(const GenerationRequest& r, std::string model_id)
        : chat_(r.api == ApiKind::chat),
          include_usage_(r.include_usage),
          model_(std::move(model_id)),
          id_(response_id(chat_ ? "chatcmpl-" : "cmpl-")),
          created_(static_cast<int64_t>(std::time(nullptr))) {}

    std::string body(const GenerateResult& r) const override {
        json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_name(r.finish)}};
        if (chat_)
            choice["message"] = {{"role", "assistant"}, {"content", r.text}, {"refusal", nullptr}};
        else
            choice["text"] = r.text;
        json j = head(chat_ ? "chat.completion" : "text_completion");
        j["choices"] = json::array({choice});
        j["usage"] = usage(r);
        return dump(j);
    }

    std::string stream_begin(int64_t) const override {
        // Chat streams open with the role; completion streams have nothing to say before the text.
        return chat_ ? chunk({{"role", "assistant"}, {"content", ""}}, nullptr) : std::string();
    }

    std::string stream_text(const std::string& piece) const override {
        return chat_ ? chunk({{"content", piece}}, nullptr) : chunk(piece, nullptr);
    }

    std::string stream_end(const GenerateResult& r) const override {
        std::string out =
            chat_ ? chunk(json::object(), finish_name(r.finish)) : chunk("", finish_name(r.finish));
        if (include_usage_) {
            json j = head(chunk_object());
            j["choices"] = json::array();
            j["usage"] = usage(r);
            out += sse(j);
        }
        return out + "data: [DONE]\n\n";
    }

    std::string stream_error(const ApiError& e) const override {
        return "data: " + e.openai_body() + "\n\ndata: [DONE]\n\n";
    }

    std::string error_body(const ApiError& e) const override { return e.openai_body(); }

private:
    const char* chunk_object() const { return chat_ ? "chat.completion.chunk" : "text_completion"; }

    json head(const char* object) const {
        return {{"id", id_},
                {"object", object},
                {"created", created_},
                {"model", model_},
                {"system_fingerprint", nullptr}};
    }

    // One streamed chunk: a chat delta or a completion text, with its finish reason (null until the end).
    std::string chunk(const json& delta_or_text, const json& finish) const {
        json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
        choice[chat_ ? "delta" : "text"] = delta_or_text;
        json j = head(chunk_object());
        j["choices"] = json::array({choice});
        return sse(j);
    }

    const bool chat_;           // chat.completion rather than text_completion
    const bool include_usage_;  // stream_options.include_usage: a last chunk with the usage
    const std::string model_;   // echoed in every object
    const std::string id_;      // one id for the whole answer, every chunk included
    const int64_t created_;     // Unix seconds
};

}  // namespace

std::unique_ptr<ApiFormat> openai_format_new(const GenerationRequest& r, const std::string& model_id) {
    return std::make_unique<OpenAIFormat>(r, model_id);
}

std::string models_body(const std::string& model_id, int64_t created) {
    return dump(
        {{"object", "list"},
         {"data",
          json::array(
              {{{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "colibri"}}})}});
}

}  // namespace coli::server
