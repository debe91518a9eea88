// Unicode canonical normalization (NFC), as the NFC normalizer of tokenizer.json applies it.
#pragma once

#include <string>
#include <string_view>

namespace coli::text {

// The NFC form of valid UTF-8 `text`. Text that has no NFC-unstable code point (all of ASCII, most CJK)
// is returned unchanged without decomposing.
std::string nfc_normalize(std::string_view text);

}  // namespace coli::text
