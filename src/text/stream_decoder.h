// Streaming decode: ids arrive one at a time (generation) and text leaves as soon as it is complete
// UTF-8. A multi-byte character split across tokens is held back until its last byte arrives; invalid
// bytes become U+FFFD exactly where Tokenizer::decode would put them, so the concatenation of everything
// push() and finish() return equals decode() of all the ids.
#pragma once

#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace coli::text {

class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false)
        : tokenizer_(tokenizer), skip_special_(skip_special) {}

    // The text that became complete with this token (possibly empty).
    std::string push(int32_t id);

    // Whatever is still held back (an incomplete sequence at the end: U+FFFD); resets the decoder.
    std::string finish();

private:
    const Tokenizer& tokenizer_;
    bool skip_special_;
    std::string pending_;
};

}  // namespace coli::text
