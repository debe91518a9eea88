// What a generation's tokens become, one token at a time: the text that became final (stop strings held
// back until settled), the end token dropped, and why the generation ended. Shared by a conversation's
// generation and the server's batched sequences.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "text/stop_strings.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"

namespace coli {

// Why a generation ended.
enum class FinishReason {
    stop,       // an end-of-turn token or a stop string
    length,     // max_tokens were generated
    cancelled,  // the caller's on_text returned false
};

// What one generate() call may do besides sampling.
struct GenerateOptions {
    int max_tokens = 0;             // most tokens to generate
    std::vector<std::string> stop;  // stop strings: the text ends just before the first one
    bool ignore_eos = false;        // keep going past end-of-turn tokens (benchmarks, load tests)
    // A prefix of the prompt worth a prefix-cache entry of its own, where later prompts are expected to
    // share it (the system message: ModelText::chat_system_tokens); 0: none.
    int64_t keep_prefix = 0;
};

// What one generate() call produced.
struct GenerateResult {
    std::string text;               // the generated text, without the end token or stop string
    int64_t prompt_tokens = 0;      // tokens of the prompt, cached prefix included
    int64_t cached_tokens = 0;      // of those, tokens whose cache entries were reused
    int64_t completion_tokens = 0;  // tokens generated, the end token included
    FinishReason finish = FinishReason::length;
    std::string stop_matched;  // the stop string that ended the text, if one did
};

class ReplyText {
public:
    // end_ids end the generation (not text); stop strings end the text just before them. on_text gets each
    // piece that became final (possibly empty) and may return false to cancel.
    ReplyText(const text::Tokenizer& tok, std::vector<int32_t> end_ids, const std::vector<std::string>& stop,
              std::function<bool(const std::string&)> on_text);

    // Takes the next generated token; false when the generation ends here (an end token, a stop string, or
    // on_text cancelled).
    bool push(int32_t id);

    // After the last token: passes on the text still held and fills result's text, completion_tokens,
    // finish and stop_matched.
    void finish(GenerateResult& result);

    bool is_end(int32_t id) const;  // one of end_ids

private:
    void emit(const std::string& piece);

    std::vector<int32_t> end_ids_;
    text::StreamDecoder decoder_;                      // ids -> UTF-8 text as it becomes whole
    text::StopStrings stops_;                          // holds text back until no stop string can begin
    std::function<bool(const std::string&)> on_text_;  // receives final text
    std::string text_;                                 // everything passed on
    int64_t tokens_ = 0;                               // tokens pushed, the end token included
    bool ended_ = false;                               // the last token was an end token
    bool cancelled_ = false;                           // on_text returned false
};

}  // namespace coli
