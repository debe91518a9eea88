#include "text/token_piece.h"

#include "text/utf8.h"

namespace coli::text {

nlohmann::json token_piece_json(std::string_view bytes) {
    if (utf8_is_valid(bytes)) return std::string(bytes);
    nlohmann::json list = nlohmann::json::array();
    for (char c : bytes) list.push_back(static_cast<unsigned char>(c));
    return list;
}

}  // namespace coli::text
