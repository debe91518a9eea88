// The loaders that fill a Tokenizer from each file format (internal to src/text).
#pragma once

#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace coli::text {

struct TokenizerLoader {
    // tokenizer_json.cpp
    static std::unique_ptr<Tokenizer> from_tokenizer_json(const nlohmann::json& tokenizer,
                                                          const nlohmann::json* config,
                                                          std::string_view what);
    // tiktoken.cpp
    static std::unique_ptr<Tokenizer> from_tiktoken(std::string_view ranks_text, std::string_view pattern,
                                                    std::vector<AddedToken> specials, std::string_view what);
    static std::unique_ptr<Tokenizer> load_tiktoken_dir(const std::filesystem::path& dir);

    // Shared: sets bos/eos/add_bos from tokenizer_config.json (may be null).
    static void apply_config(Tokenizer& t, const nlohmann::json* config, std::string_view what);
    // Shared: registers an added token (id table, special flag, decode bytes when not in the vocab).
    static void add_token(Tokenizer& t, const AddedToken& token);
};

}  // namespace coli::text
