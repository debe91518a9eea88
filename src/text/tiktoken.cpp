// Reads tiktoken rank files ("base64(token bytes) rank" per line, rank = id) and the Kimi model directory
// layout: tiktoken.model, tokenizer_config.json (names of the special tokens) and tokenization_kimi.py
// (the split pattern, `pat_str`), as docs/models.md 10.1 describes.
#include <array>
#include <charconv>

#include "core/error.h"
#include "io/json.h"
#include "text/tokenizer_loader.h"

namespace coli::text {

namespace {

// Kimi reserves this many special ids right after the base tokens (tokenization_kimi.py).
constexpr int32_t kKimiReservedSpecials = 256;

std::optional<std::string> base64_decode(std::string_view s) {
    static const std::array<int8_t, 256> table = [] {
        std::array<int8_t, 256> t{};
        t.fill(-1);
        std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (size_t i = 0; i < alphabet.size(); ++i)
            t[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
        return t;
    }();
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : s) {
        if (c == '=') break;
        int8_t v = table[static_cast<uint8_t>(c)];
        if (v < 0) return std::nullopt;
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xFF);
        }
    }
    return out;
}

// The Python raw-string literals of `pat_str = "|".join([r"""...""", ...])` in tokenization_kimi.py,
// joined with '|'. The file is read as text, never executed.
std::string kimi_pattern(std::string_view source, std::string_view what) {
    constexpr std::string_view kJoin = "\"|\".join(";
    constexpr std::string_view kRawQuote = "r\"\"\"";
    constexpr std::string_view kQuote = "\"\"\"";
    size_t at = source.find("pat_str");
    size_t join = at == std::string_view::npos ? at : source.find(kJoin, at);
    size_t pos =
        join == std::string_view::npos ? join : source.find_first_not_of(" \t\r\n", join + kJoin.size());
    if (pos == std::string_view::npos || source[pos] != '[')
        fail("{}: no pat_str = \"|\".join([r\"\"\"...\"\"\", ...]) (the tiktoken split pattern)", what);
    ++pos;
    std::string pattern;
    for (;;) {
        pos = source.find_first_not_of(" \t\r\n,", pos);
        if (pos == std::string_view::npos) fail("{}: pat_str list is not closed", what);
        if (source[pos] == ']') break;
        if (source[pos] == '#') {  // a comment line inside the list
            pos = source.find('\n', pos);
            continue;
        }
        if (source.substr(pos, kRawQuote.size()) != kRawQuote)
            fail("{}: pat_str list holds something other than r\"\"\"...\"\"\" strings", what);
        size_t start = pos + kRawQuote.size();
        size_t end = source.find(kQuote, start);
        if (end == std::string_view::npos) fail("{}: unterminated r\"\"\" string in pat_str", what);
        if (!pattern.empty()) pattern += '|';
        pattern.append(source.substr(start, end - start));
        pos = end + kQuote.size();
    }
    if (pattern.empty()) fail("{}: pat_str is empty", what);
    return pattern;
}

}  // namespace

std::unique_ptr<Tokenizer> TokenizerLoader::from_tiktoken(std::string_view ranks_text,
                                                          std::string_view pattern,
                                                          std::vector<AddedToken> specials,
                                                          std::string_view what) {
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    BpeModel& bpe = t->bpe_;
    bpe.whole_piece_first = true;
    bpe.byte_ids.fill(-1);
    size_t line_no = 0;
    for (size_t pos = 0; pos < ranks_text.size();) {
        size_t eol = ranks_text.find('\n', pos);
        if (eol == std::string_view::npos) eol = ranks_text.size();
        std::string_view line = ranks_text.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        size_t space = line.find(' ');
        int32_t rank = -1;
        std::optional<std::string> bytes;
        if (space != std::string_view::npos) {
            bytes = base64_decode(line.substr(0, space));
            std::string_view r = line.substr(space + 1);
            auto res = std::from_chars(r.data(), r.data() + r.size(), rank);
            if (res.ec != std::errc() || res.ptr != r.data() + r.size()) rank = -1;
        }
        if (!bytes || rank < 0 || bytes->empty()) fail("{}: line {} is not \"base64 rank\"", what, line_no);
        if (rank >= t->vocab_size()) {
            t->id_bytes_.resize(rank + 1);
            t->special_.resize(rank + 1);
        }
        if (!bpe.bytes_to_id.insert(*bytes, rank)) fail("{}: line {}: the same token twice", what, line_no);
        t->id_bytes_[rank] = *bytes;
        t->token_ids_[*bytes] = rank;
        if (bytes->size() == 1) bpe.byte_ids[static_cast<uint8_t>((*bytes)[0])] = rank;
    }
    for (int b = 0; b < 256; ++b)
        if (bpe.byte_ids[b] < 0) fail("{}: no token for the single byte 0x{:02x}", what, b);
    // Rank BPE merges two adjacent parts (both tokens) when their concatenation is a token, lowest rank
    // first. Listing every such pair once, (left, right) -> rank of the concatenation, makes it the same
    // loop as merge-list BPE, with integer keys instead of hashing byte strings on every step (the hot
    // spot). Every split of a token into two tokens is listed, so no pair the byte-string search would
    // find is missing: this is exact, unlike rebuilding a merge list.
    for (int32_t id = 0; id < t->vocab_size(); ++id) {
        std::string_view token = t->id_bytes_[id];
        for (size_t k = 1; k < token.size(); ++k) {
            auto left = bpe.bytes_to_id.find(token.substr(0, k));
            if (!left) continue;
            auto right = bpe.bytes_to_id.find(token.substr(k));
            if (right) bpe.merges.insert(*left, *right, Merge{id, id});
        }
    }
    for (AddedToken& s : specials) {
        s.special = true;
        s.normalized = false;
        add_token(*t, s);
    }
    SplitStep split;
    try {
        split.regex = std::make_shared<Regex>(pattern);
    } catch (const Error& e) {
        fail("{}: {}", what, e.what());
    }
    // tiktoken keeps the matches of the pattern and drops anything between them.
    split.behavior = SplitBehavior::kRemoved;
    split.invert = true;
    t->pre_tokenizer_.push_back(std::move(split));
    return t;
}

std::unique_ptr<Tokenizer> TokenizerLoader::load_tiktoken_dir(const std::filesystem::path& dir) {
    std::filesystem::path model = dir / "tiktoken.model";
    std::string ranks = file_read_text(model);

    std::filesystem::path py = dir / "tokenization_kimi.py";
    if (!std::filesystem::exists(py))
        fail("{}: tiktoken.model without tokenization_kimi.py: the split pattern (pat_str) is unknown",
             dir.string());
    std::string pattern = kimi_pattern(file_read_text(py), py.string());

    std::optional<nlohmann::json> config;
    std::filesystem::path config_path = dir / "tokenizer_config.json";
    if (std::filesystem::exists(config_path)) config = json_read_file(config_path);

    // Base tokens are the lines of tiktoken.model; the reserved specials follow them.
    int32_t base = 0;
    for (char c : ranks) base += c == '\n';
    if (!ranks.empty() && ranks.back() != '\n') ++base;
    std::vector<AddedToken> specials;
    for (int32_t id = base; id < base + kKimiReservedSpecials; ++id) {
        AddedToken tok;
        tok.id = id;
        tok.content = "<|reserved_token_" + std::to_string(id) + "|>";
        if (config && config->contains("added_tokens_decoder")) {
            const auto& named = (*config)["added_tokens_decoder"];
            auto it = named.find(std::to_string(id));
            if (it != named.end()) {
                if (!it->contains("content") || !(*it)["content"].is_string())
                    fail("{}: added_tokens_decoder {} has no content", config_path.string(), id);
                tok.content = (*it)["content"].get<std::string>();
            }
        }
        specials.push_back(std::move(tok));
    }
    auto t = from_tiktoken(ranks, pattern, std::move(specials), model.string());
    apply_config(*t, config ? &*config : nullptr, config_path.string());
    return t;
}

}  // namespace coli::text
