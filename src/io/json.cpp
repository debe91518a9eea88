#include "io/json.h"

#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "io/file.h"

namespace coli {

namespace {

// nlohmann's messages can quote a whole offending token; keep errors one readable line.
constexpr size_t kMaxDetailChars = 200;

// "[json.exception.parse_error.101] parse error at ..." -> "parse error at ...", shortened.
std::string parse_error_detail(const nlohmann::json::exception& e) {
    std::string_view msg = e.what();
    if (auto close = msg.find("] "); !msg.empty() && msg.front() == '[' && close != std::string_view::npos)
        msg.remove_prefix(close + 2);
    std::string detail(msg.substr(0, kMaxDetailChars));
    if (msg.size() > kMaxDetailChars) detail += "...";
    return detail;
}

}  // namespace

std::string quote(std::string_view s) {
    // The replace handler turns invalid UTF-8 into U+FFFD instead of throwing.
    std::string shown = nlohmann::json(std::string(s.substr(0, kMaxDetailChars)))
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() > kMaxDetailChars) shown += "...";
    return shown;
}

namespace {

// A validating pass over the text that keeps nothing but the keys of the objects open at each point, and
// fails on a syntax error or a repeated key. (nlohmann's parser callback could do this in the same pass,
// but its parser then rescans the enclosing object after every nested object ends, which is quadratic:
// seconds for a header of 20000 tensors.)
class DuplicateKeyCheck final : public nlohmann::json_sax<nlohmann::json> {
public:
    explicit DuplicateKeyCheck(std::string_view what) : what_(what) {}

    bool start_object(std::size_t) override {
        open_objects_.emplace_back();
        return true;
    }
    bool key(string_t& key) override {
        if (!open_objects_.back().insert(key).second)
            fail("{}: bad JSON: duplicate key {}", what_, quote(key));
        return true;
    }
    bool end_object() override {
        open_objects_.pop_back();
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
        fail("{}: bad JSON: {}", what_, parse_error_detail(e));
    }

    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }

private:
    std::string_view what_;
    std::vector<std::unordered_set<std::string>> open_objects_;  // keys seen, per open object
};

}  // namespace

nlohmann::json json_parse(std::string_view text, std::string_view what) {
    DuplicateKeyCheck check_keys(what);
    nlohmann::json::sax_parse(text.begin(), text.end(), &check_keys);
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {  // not expected: the first pass accepted the text
        fail("{}: bad JSON: {}", what, parse_error_detail(e));
    }
}

std::string file_read_text(const std::filesystem::path& path) {
    ReadFile file(path);
    std::string text(file.size(), '\0');
    file.read_at(text.data(), text.size(), 0);
    return text;
}

nlohmann::json json_read_file(const std::filesystem::path& path) {
    return json_parse(file_read_text(path), path.string());
}

}  // namespace coli
