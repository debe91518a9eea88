// Added tokens (special tokens like <|endoftext|> and other literal tokens): found in the text before any
// normalization or pre-tokenization and emitted as their ids, the way HF tokenizers' AddedVocabulary
// does: leftmost-longest match, with the lstrip / rstrip / single_word options.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace coli::text {

struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = false;
    bool lstrip = false;       // the match takes the whitespace before it
    bool rstrip = false;       // ... and after it
    bool single_word = false;  // matches only between non-word characters
    bool normalized = false;   // matched in the normalized text rather than the raw text
};

// A segment of text: either plain text [begin, end) or an added token's id.
struct Segment {
    size_t begin;
    size_t end;
    int32_t token = -1;  // -1 for plain text
};

// A trie over the contents of one group of added tokens.
class AddedTokenMatcher {
public:
    void add(const AddedToken& token);
    bool empty() const { return tokens_.empty(); }

    // Cuts text[begin, end) into plain and token segments, appending them to `out`.
    void split(std::string_view text, size_t begin, size_t end, std::vector<Segment>& out) const;

private:
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
        int32_t token = -1;                                 // index into tokens_ ending here
    };
    int32_t child(int32_t node, uint8_t byte) const;
    // The longest token matching at `pos` (index into tokens_), or -1.
    int32_t longest_at(std::string_view text, size_t pos, size_t end) const;

    std::vector<AddedToken> tokens_;
    std::vector<Node> nodes_{Node{}};
    bool first_byte_[256] = {};
};

}  // namespace coli::text
