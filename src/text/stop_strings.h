// Stop strings for generated text: the text ends just before the first occurrence of any of them. Text
// that could still become the start of a stop string is held back until the next piece settles it, so a
// caller that streams what push() returns never shows a stop string, even one split across tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace coli::text {

class StopStrings {
public:
    explicit StopStrings(std::vector<std::string> stops);  // empty strings are ignored

    // Appends a piece of generated text; returns the text that is now final (possibly empty). After a
    // match, returns the text before the stop string and stopped() is true; later pieces are ignored.
    std::string push(std::string_view piece);

    // The text still held back (the end of the generation: no stop string can complete any more).
    std::string finish();

    bool stopped() const { return matched_ != nullptr; }
    // The stop string that ended the text, or "" while none has.
    const std::string& matched() const;

private:
    std::vector<std::string> stops_;
    std::string held_;                      // text that is a possible start of a stop string
    const std::string* matched_ = nullptr;  // the stop string found, into stops_
};

}  // namespace coli::text
