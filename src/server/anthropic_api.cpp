// Anthropic's Messages answers: a message object, or the event stream message_start, content_block_start,
// content_block_delta..., content_block_stop, message_delta, message_stop.
#include <nlohmann/json.hpp>

#include "server/api_format.h"

namespace coli::server {

namespace {

using nlohmann::json;

std::string dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string event(const char* name, const json& data) {
    return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n";
}

json stop_reason(const GenerateResult& r) {
    if (r.finish == FinishReason::length) return "max_tokens";
    return r.stop_matched.empty() ? "end_turn" : "stop_sequence";
}

json stop_sequence(const GenerateResult& r) {
    return r.stop_matched.empty() ? json(nullptr) : json(r.stop_matched);
}

class AnthropicFormat : public ApiFormat {
public:
    explicit AnthropicFormat(std::string model_id) : model_(std::move(model_id)), id_(response_id("msg_")) {}

    std::string body(const GenerateResult& r) const override {
        json j =
            message(json::array({{{"type", "text"}, {"text", r.text}}}), stop_reason(r), stop_sequence(r));
        j["usage"] = {{"input_tokens", r.prompt_tokens}, {"output_tokens", r.completion_tokens}};
        return dump(j);
    }

    std::string stream_begin(int64_t prompt_tokens) const override {
        json m = message(json::array(), nullptr, nullptr);
        m["usage"] = {{"input_tokens", prompt_tokens}, {"output_tokens", 0}};
        return event("message_start", {{"type", "message_start"}, {"message", m}}) +
               event("content_block_start", {{"type", "content_block_start"},
                                             {"index", 0},
                                             {"content_block", {{"type", "text"}, {"text", ""}}}});
    }

    std::string stream_text(const std::string& piece) const override {
        return event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", 0},
                                             {"delta", {{"type", "text_delta"}, {"text", piece}}}});
    }

    std::string stream_end(const GenerateResult& r) const override {
        return event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}) +
               event("message_delta",
                     {{"type", "message_delta"},
                      {"delta", {{"stop_reason", stop_reason(r)}, {"stop_sequence", stop_sequence(r)}}},
                      {"usage", {{"output_tokens", r.completion_tokens}}}}) +
               event("message_stop", {{"type", "message_stop"}});
    }

    std::string stream_error(const ApiError& e) const override {
        return "event: error\ndata: " + e.anthropic_body() + "\n\n";
    }

    std::string error_body(const ApiError& e) const override { return e.anthropic_body(); }

private:
    json message(json content, json reason, json sequence) const {
        return {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", std::move(content)},
                {"stop_reason", std::move(reason)},
                {"stop_sequence", std::move(sequence)}};
    }

    const std::string model_;  // echoed in the message
    const std::string id_;     // the message id
};

}  // namespace

std::unique_ptr<ApiFormat> anthropic_format_new(const GenerationRequest&, const std::string& model_id) {
    return std::make_unique<AnthropicFormat>(model_id);
}

}  // namespace coli::server
