#include "server/request.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>

#include "server/api_error.h"

namespace coli::server {

namespace {

using nlohmann::json;

// OpenAI's ranges for the sampling parameters; Anthropic's temperature stops at 1.
constexpr double kMaxTemperatureOpenAI = 2.0;
constexpr double kMaxTemperatureAnthropic = 1.0;
// OpenAI's /v1/completions generates 16 tokens when max_tokens is not given.
constexpr int kCompletionDefaultTokens = 16;

json body_parse(std::string_view body) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception& e) {
        // A syntax error, or a number too large for a double (out_of_range, found by fuzz_request).
        // nlohmann's message starts with "[json.exception.parse_error.101] ": keep only the sentence.
        std::string what = e.what();
        if (const size_t at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);
        invalid_request(fmt::format("the request body is not valid JSON: {}", what), "", "invalid_json");
    }
    if (!j.is_object()) invalid_request("the request body must be a JSON object");
    return j;
}

const char* type_name(const json& v) {
    return v.type_name();
}

// A client's string inside an error message: JSON-quoted, so that it stays on one line.
std::string json_quoted(const std::string& s) {
    return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The field, or nullptr when it is absent or null (OpenAI treats null as absent).
const json* field(const json& obj, const char* name) {
    const auto it = obj.find(name);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string string_get(const json& v, const std::string& name) {
    if (!v.is_string())
        invalid_request(fmt::format("'{}' must be a string, not {}", name, type_name(v)), name);
    return v.get<std::string>();
}

bool bool_get(const json& v, const std::string& name) {
    if (!v.is_boolean())
        invalid_request(fmt::format("'{}' must be a boolean, not {}", name, type_name(v)), name);
    return v.get<bool>();
}

double number_get(const json& v, const std::string& name, double lo, double hi) {
    if (!v.is_number())
        invalid_request(fmt::format("'{}' must be a number, not {}", name, type_name(v)), name);
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi))
        invalid_request(fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, x), name);
    return x;
}

int64_t integer_get(const json& v, const std::string& name, int64_t lo, int64_t hi) {
    if (!v.is_number_integer())
        invalid_request(
            fmt::format("'{}' must be an integer, not {}", name, v.is_number() ? "a fraction" : type_name(v)),
            name);
    // Unsigned values beyond int64 compare as themselves, not wrapped.
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
        invalid_request(
            fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, v.get<uint64_t>()), name);
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
        invalid_request(fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, x), name);
    return x;
}

// Text content: a string, or an array of {"type":"text","text":...} parts, concatenated.
std::string content_get(const json& v, const std::string& name) {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array())
        invalid_request(
            fmt::format("'{}' must be a string or an array of text parts, not {}", name, type_name(v)), name);
    std::string text;
    for (size_t i = 0; i < v.size(); ++i) {
        const json& part = v[i];
        const std::string where = fmt::format("{}[{}]", name, i);
        if (!part.is_object())
            invalid_request(fmt::format("'{}' must be an object, not {}", where, type_name(part)), where);
        const json* type = field(part, "type");
        if (!type || string_get(*type, where + ".type") != "text")
            invalid_request(
                fmt::format("'{}': only text parts ({{\"type\": \"text\"}}) are supported", where), where);
        const json* t = field(part, "text");
        if (!t) invalid_request(fmt::format("'{}.text' is required", where), where + ".text");
        text += string_get(*t, where + ".text");
    }
    return text;
}

// Stop strings: one string or an array of up to kMaxStopStrings non-empty strings.
std::vector<std::string> stop_get(const json& v, const std::string& name, bool allow_single) {
    std::vector<std::string> stops;
    if (allow_single && v.is_string()) {
        stops.push_back(v.get<std::string>());
    } else if (v.is_array()) {
        if (v.size() > kMaxStopStrings)
            invalid_request(
                fmt::format("'{}' may hold at most {} strings, got {}", name, kMaxStopStrings, v.size()),
                name);
        for (size_t i = 0; i < v.size(); ++i)
            stops.push_back(string_get(v[i], fmt::format("{}[{}]", name, i)));
    } else {
        invalid_request(fmt::format("'{}' must be {}an array of strings, not {}", name,
                                    allow_single ? "a string or " : "", type_name(v)),
                        name);
    }
    for (const std::string& s : stops)
        if (s.empty()) invalid_request(fmt::format("'{}' must not contain an empty string", name), name);
    return stops;
}

std::string model_get(const json& j) {
    const json* m = field(j, "model");
    if (!m) invalid_request("'model' is required: name the model (GET /v1/models lists it)", "model");
    return string_get(*m, "model");
}

int max_tokens_get(const json& v, const std::string& name, const RequestLimits& limits) {
    if (v.is_number_integer() && v.get<int64_t>() > limits.max_ctx)
        invalid_request(fmt::format("'{}' is {}, more than the model's context of {} tokens", name,
                                    v.get<int64_t>(), limits.max_ctx),
                        name, "context_length_exceeded");
    return static_cast<int>(integer_get(v, name, 1, limits.max_ctx));
}

// Whether a value asks for nothing: null, false, 0, "", [] or {} (what clients send for "off").
bool is_neutral(const json& v) {
    if (v.is_boolean()) return !v.get<bool>();
    if (v.is_number()) return v.get<double>() == 0;
    if (v.is_string()) return v.get<std::string>().empty();
    return v.empty();  // null, [] or {}
}

// Options that would change the answer but are not implemented: asking for one is an error rather than a
// silent no-op (docs/design.md rule 3); their "off" values are accepted.
void unsupported_reject(const json& j, std::initializer_list<const char*> names) {
    for (const char* name : names)
        if (const json* v = field(j, name); v && !is_neutral(*v))
            invalid_request(fmt::format("'{}' is not supported by this server", name), name,
                            "unsupported_parameter");
}

// The fields OpenAI's chat and completion requests share.
void openai_common_parse(const json& j, const RequestLimits& limits, GenerationRequest& r) {
    r.model = model_get(j);
    unsupported_reject(j, {"frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs",
                           "tools", "functions"});
    r.sampler.temperature = 1;  // OpenAI's default
    if (const json* v = field(j, "max_completion_tokens"))
        r.max_tokens = max_tokens_get(*v, "max_completion_tokens", limits);
    else if (const json* v = field(j, "max_tokens"))
        r.max_tokens = max_tokens_get(*v, "max_tokens", limits);
    if (const json* v = field(j, "temperature"))
        r.sampler.temperature = static_cast<float>(number_get(*v, "temperature", 0, kMaxTemperatureOpenAI));
    if (const json* v = field(j, "top_p")) {
        r.sampler.top_p = static_cast<float>(number_get(*v, "top_p", 0, 1));
        if (r.sampler.top_p == 0) invalid_request("'top_p' must be greater than 0", "top_p");
    }
    if (const json* v = field(j, "seed")) {
        r.sampler.seed = static_cast<uint64_t>(integer_get(*v, "seed", std::numeric_limits<int64_t>::min(),
                                                           std::numeric_limits<int64_t>::max()));
        r.seed_given = true;
    }
    if (const json* v = field(j, "stop")) r.stop = stop_get(*v, "stop", true);
    if (const json* v = field(j, "stream")) r.stream = bool_get(*v, "stream");
    if (const json* v = field(j, "stream_options")) {
        if (!v->is_object())
            invalid_request(fmt::format("'stream_options' must be an object, not {}", type_name(*v)),
                            "stream_options");
        if (const json* u = field(*v, "include_usage"))
            r.include_usage = bool_get(*u, "stream_options.include_usage");
    }
    if (const json* v = field(j, "n"); v && integer_get(*v, "n", 1, std::numeric_limits<int>::max()) != 1)
        invalid_request("'n' must be 1: one choice per request is supported", "n");
    if (const json* v = field(j, "ignore_eos")) r.ignore_eos = bool_get(*v, "ignore_eos");
}

// The two APIs' conversation lists: element names in errors, the roles they allow, whether content may be
// absent.
enum class MessageDialect { openai, anthropic };

// Appends the body's 'messages' ({role, content} objects) to r.messages, checked the dialect's way.
void messages_append(const json& j, MessageDialect dialect, GenerationRequest& r) {
    const bool openai = dialect == MessageDialect::openai;
    const json* msgs = field(j, "messages");
    if (!msgs) invalid_request("'messages' is required", "messages");
    if (!msgs->is_array() || msgs->empty())
        invalid_request("'messages' must be a non-empty array of {role, content} objects", "messages");
    for (size_t i = 0; i < msgs->size(); ++i) {
        const json& m = (*msgs)[i];
        const std::string where = openai ? fmt::format("messages[{}]", i) : fmt::format("messages.{}", i);
        if (!m.is_object())
            invalid_request(fmt::format("'{}' must be an object, not {}", where, type_name(m)), where);
        const json* role = field(m, "role");
        if (!role) invalid_request(fmt::format("'{}.role' is required", where), where + ".role");
        std::string role_name = string_get(*role, where + ".role");
        if (openai && role_name == "developer") role_name = "system";  // OpenAI's newer name for it
        const bool known =
            role_name == "user" || role_name == "assistant" || (openai && role_name == "system");
        if (!known)
            invalid_request(fmt::format("'{}.role' must be {}, got {}", where,
                                        openai ? "system, developer, user or assistant" : "user or assistant",
                                        json_quoted(role_name)),
                            where + ".role");
        const json* content = field(m, "content");
        if (!content && !openai)
            invalid_request(fmt::format("'{}.content' is required", where), where + ".content");
        r.messages.push_back(
            {role_name, content ? content_get(*content, where + ".content") : std::string()});
    }
}

}  // namespace

GenerationRequest chat_request_parse(std::string_view body, const RequestLimits& limits) {
    const json j = body_parse(body);
    GenerationRequest r;
    r.api = ApiKind::chat;
    openai_common_parse(j, limits, r);
    if (const json* v = field(j, "response_format");
        v && !(v->is_object() && v->value("type", json("text")) == json("text")))
        invalid_request("'response_format' other than {\"type\": \"text\"} is not supported by this server",
                        "response_format", "unsupported_parameter");
    messages_append(j, MessageDialect::openai, r);
    return r;
}

GenerationRequest completion_request_parse(std::string_view body, const RequestLimits& limits) {
    const json j = body_parse(body);
    GenerationRequest r;
    r.api = ApiKind::completion;
    r.max_tokens = std::min<int64_t>(kCompletionDefaultTokens, limits.max_ctx);
    openai_common_parse(j, limits, r);
    unsupported_reject(j, {"echo", "suffix"});
    if (const json* v = field(j, "best_of");
        v && integer_get(*v, "best_of", 1, std::numeric_limits<int>::max()) != 1)
        invalid_request("'best_of' must be 1: one candidate per request is supported", "best_of",
                        "unsupported_parameter");
    const json* p = field(j, "prompt");
    if (!p) invalid_request("'prompt' is required", "prompt");
    if (p->is_array()) {
        // A list of prompts is a batch of choices; one prompt in a list is the same as the prompt.
        if (p->size() != 1)
            invalid_request("'prompt' must be one string: batched prompts are not supported", "prompt");
        r.prompt = string_get((*p)[0], "prompt[0]");
    } else {
        r.prompt = string_get(*p, "prompt");
    }
    if (r.prompt.empty()) invalid_request("'prompt' must not be empty", "prompt");
    return r;
}

GenerationRequest messages_request_parse(std::string_view body, const RequestLimits& limits) {
    const json j = body_parse(body);
    GenerationRequest r;
    r.api = ApiKind::messages;
    r.model = model_get(j);
    unsupported_reject(j, {"tools"});
    r.sampler.temperature = 1;  // Anthropic's default
    const json* mt = field(j, "max_tokens");
    if (!mt) invalid_request("'max_tokens' is required", "max_tokens");
    r.max_tokens = max_tokens_get(*mt, "max_tokens", limits);
    if (const json* v = field(j, "temperature"))
        r.sampler.temperature =
            static_cast<float>(number_get(*v, "temperature", 0, kMaxTemperatureAnthropic));
    if (const json* v = field(j, "top_p")) {
        r.sampler.top_p = static_cast<float>(number_get(*v, "top_p", 0, 1));
        if (r.sampler.top_p == 0) invalid_request("'top_p' must be greater than 0", "top_p");
    }
    if (const json* v = field(j, "top_k"))
        r.sampler.top_k = static_cast<int>(integer_get(*v, "top_k", 0, std::numeric_limits<int>::max()));
    if (const json* v = field(j, "stop_sequences")) r.stop = stop_get(*v, "stop_sequences", false);
    if (const json* v = field(j, "stream")) r.stream = bool_get(*v, "stream");
    if (const json* v = field(j, "ignore_eos")) r.ignore_eos = bool_get(*v, "ignore_eos");
    if (const json* v = field(j, "system")) r.messages.push_back({"system", content_get(*v, "system")});
    messages_append(j, MessageDialect::anthropic, r);
    return r;
}

TokenizeRequest tokenize_request_parse(std::string_view body) {
    const json j = body_parse(body);
    TokenizeRequest r;
    const json* content = field(j, "content");
    if (!content) invalid_request("'content' is required: the text to tokenize", "content");
    r.content = string_get(*content, "content");
    if (const json* v = field(j, "add_special")) r.add_special = bool_get(*v, "add_special");
    if (const json* v = field(j, "with_pieces")) r.with_pieces = bool_get(*v, "with_pieces");
    return r;
}

std::vector<int32_t> detokenize_request_parse(std::string_view body, int32_t vocab_size) {
    const json j = body_parse(body);
    const json* tokens = field(j, "tokens");
    if (!tokens) invalid_request("'tokens' is required: the token ids to turn into text", "tokens");
    if (!tokens->is_array())
        invalid_request(fmt::format("'tokens' must be an array of token ids, not {}", type_name(*tokens)),
                        "tokens");
    std::vector<int32_t> ids;
    ids.reserve(tokens->size());
    for (size_t i = 0; i < tokens->size(); ++i)
        ids.push_back(static_cast<int32_t>(integer_get((*tokens)[i], fmt::format("tokens[{}]", i), 0,
                                                       static_cast<int64_t>(vocab_size) - 1)));
    return ids;
}

std::vector<text::ChatMessage> apply_template_request_parse(std::string_view body) {
    const json j = body_parse(body);
    GenerationRequest r;
    messages_append(j, MessageDialect::openai, r);
    return std::move(r.messages);
}

}  // namespace coli::server
