// A small JSON writer for history output (JSON-lines store, report --json). Strings are escaped
// so that any input bytes give valid JSON: bytes that are not well-formed UTF-8 become U+FFFD.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pgwarden::history {

// Appends `s` as a quoted JSON string.
void appendJsonString(std::string& out, std::string_view s);

// True when `text` is one complete JSON value (used to check guard_actions before storing it as
// JSON rather than as a string).
bool isJsonValue(std::string_view text);

// Builds one JSON value by appending to a string. The caller nests begin/end calls correctly;
// commas are placed by the writer.
class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view k);
  JsonWriter& string(std::string_view v);
  JsonWriter& number(int64_t v);
  JsonWriter& boolean(bool v);
  JsonWriter& null();
  // Inserts `json` verbatim; the caller guarantees it is one valid JSON value.
  JsonWriter& raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }
  void clear();

 private:
  void separate();

  std::string out_;
  bool need_comma_ = false;
};

}  // namespace pgwarden::history
