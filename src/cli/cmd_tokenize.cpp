// `coli tokenize`: text -> token ids with a model's own tokenizer, a corpus of JSON lines -> JSON arrays of
// ids in one process, or a conversation -> the prompt its chat template renders. Only the tokenizer files
// are read (tokenizer.json + tokenizer_config.json, or tiktoken.model with its config), never config.json
// or weights, so DIR may be a folder of tokenizer files alone.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "io/json.h"
#include "server/api_error.h"
#include "server/request.h"
#include "text/chat_template.h"
#include "text/token_piece.h"
#include "text/tokenizer.h"

namespace coli {
namespace {

struct TokenizeArgs {
    std::filesystem::path model_dir;  // the tokenizer files
    std::string text;                 // TEXT, the one string to tokenize
    bool text_given = false;          // TEXT was given (it may be empty)
    std::string jsonl;                // --jsonl FILE: one JSON string per line ("-": stdin)
    std::string chat;                 // --chat FILE.json: an OpenAI-style message list ("-": stdin)
    bool pieces = false;              // --pieces: show each token's text beside its id
    bool special = false;             // --special: add what the post-processor adds (BOS and the like)
    bool ids = false;                 // --ids: with --chat, the prompt's ids instead of its text
};

// Output is gathered and written in blocks of this size: a corpus may have millions of lines.
constexpr size_t kFlushBytes = 1 << 20;

// A file's text, or stdin's for "-".
std::string input_read(const std::string& path) {
    if (path != "-") return file_read_text(path);
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    return text;
}

void write_out(const std::string& s) {
    check(std::fwrite(s.data(), 1, s.size(), stdout) == s.size(), "cannot write to stdout");
}

std::string json_text(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Ids as `coli run --ids` takes them ("3,17,42"), or with pieces one "ID<TAB>PIECE" line per token, PIECE
// as JSON (a string, or a list of byte values where the bytes are not whole UTF-8 characters).
std::string ids_text(const text::Tokenizer& tok, const std::vector<int32_t>& ids, bool pieces) {
    std::string out;
    if (pieces) {
        for (int32_t id : ids)
            out += fmt::format("{}\t{}\n", id, json_text(text::token_piece_json(tok.token_bytes(id))));
        return out;
    }
    out = fmt::format("{}\n", fmt::join(ids, ","));
    return out;
}

// One JSON array per line: ids, or {"id", "piece"} objects with --pieces.
std::string ids_json(const text::Tokenizer& tok, const std::vector<int32_t>& ids, bool pieces) {
    nlohmann::json list = nlohmann::json::array();
    for (int32_t id : ids) {
        if (pieces)
            list.push_back({{"id", id}, {"piece", text::token_piece_json(tok.token_bytes(id))}});
        else
            list.push_back(id);
    }
    return json_text(list) + "\n";
}

void jsonl_tokenize(const text::Tokenizer& tok, const TokenizeArgs& a) {
    std::ifstream file;
    if (a.jsonl != "-") {
        file.open(a.jsonl, std::ios::binary);
        check(file.good(), "cannot open {}", a.jsonl);
    }
    std::istream& in = a.jsonl == "-" ? std::cin : file;
    const std::string name = a.jsonl == "-" ? "stdin" : a.jsonl;
    std::string line, out;
    for (size_t number = 1; std::getline(in, line); ++number) {
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
            // nlohmann's message starts with "[json.exception.parse_error.101] ": keep the sentence.
            std::string what = e.what();
            if (const size_t at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);
            fail("{}:{}: not a JSON string: {}", name, number, what);
        }
        check(j.is_string(), "{}:{}: expected one JSON string per line, got {}", name, number, j.type_name());
        out += ids_json(tok, tok.encode(j.get<std::string>(), a.special), a.pieces);
        if (out.size() >= kFlushBytes) {
            write_out(out);
            out.clear();
        }
    }
    check(!in.bad(), "cannot read {}", name);
    write_out(out);
}

// The file's messages, checked as /v1/chat/completions and /apply-template check them: a JSON array of
// {role, content} objects, or an object with "messages" (a request body).
std::vector<text::ChatMessage> chat_messages_read(const std::string& path) {
    const std::string name = path == "-" ? "stdin" : path;
    nlohmann::json j = nlohmann::json::parse(input_read(path), nullptr, false);
    check(!j.is_discarded(), "{}: not valid JSON", name);
    if (j.is_array()) j = {{"messages", std::move(j)}};
    check(j.is_object(), "{}: expected a JSON array of messages or an object with \"messages\"", name);
    try {
        return server::apply_template_request_parse(json_text(j));
    } catch (const server::ApiException& e) {
        fail("{}: {}", name, e.error.message);
    }
}

void tokenize(const TokenizeArgs& a) {
    const int sources = a.text_given + !a.jsonl.empty() + !a.chat.empty();
    check(sources == 1, "give exactly one of TEXT, --jsonl FILE or --chat FILE.json ({} given)", sources);
    check(!a.ids || !a.chat.empty(), "--ids applies to --chat (TEXT and --jsonl always print ids)");
    check(!a.special || a.chat.empty(),
          "--special does not apply to --chat: the chat template writes the special tokens itself");
    const std::unique_ptr<text::Tokenizer> tok = text::Tokenizer::load(a.model_dir);
    if (!a.jsonl.empty()) return jsonl_tokenize(*tok, a);
    if (!a.chat.empty()) {
        const std::vector<text::ChatMessage> messages = chat_messages_read(a.chat);
        const std::string prompt = text::ChatTemplate::load(a.model_dir).render(messages, true);
        // Special tokens in the rendered prompt are meant as tokens, and the template already wrote BOS
        // where the model wants it: encoded as the server encodes a chat.
        return write_out(a.ids ? ids_text(*tok, tok->encode(prompt, false), a.pieces) : prompt);
    }
    write_out(ids_text(*tok, tok->encode(a.text, a.special), a.pieces));
}

}  // namespace

void cmd_tokenize_add(CLI::App& app) {
    auto args = std::make_shared<TokenizeArgs>();
    CLI::App* cmd = app.add_subcommand(
        "tokenize",
        "Text to token ids with a model's tokenizer, or a conversation to its chat-template prompt");
    args->model_dir = default_model_dir();
    cmd->add_option(
           "--model,-m", args->model_dir,
           "Model directory; only the tokenizer files are read (tokenizer.json + "
           "tokenizer_config.json, or tiktoken.model and its config); default: the bundled demo model")
        ->capture_default_str();
    CLI::Option* text =
        cmd->add_option("text", args->text, "The text to tokenize; prints its ids comma-separated");
    cmd->add_flag("--pieces", args->pieces,
                  "Also print each token's text: one 'ID<TAB>PIECE' line per token (PIECE as JSON), or "
                  "{\"id\", \"piece\"} objects with --jsonl");
    cmd->add_option("--jsonl", args->jsonl,
                    "Tokenize a corpus: one JSON string per line in, one JSON array of ids per line out "
                    "('-': stdin)");
    cmd->add_flag("--special", args->special,
                  "Add what the tokenizer's post-processor adds (BOS and the like); off by default");
    cmd->add_option("--chat", args->chat,
                    "Render an OpenAI-style message list (a JSON array, or an object with \"messages\") with "
                    "the model's chat template and the generation prompt; prints the prompt text as is");
    cmd->add_flag("--ids", args->ids, "With --chat: print the prompt's token ids instead of its text");
    cmd->callback([args, text] {
        args->text_given = text->count() > 0;
        tokenize(*args);
    });
}

}  // namespace coli
