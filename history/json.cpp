// JSON string escaping and the small streaming writer. Escaping decodes UTF-8 as it goes so that
// malformed input never reaches the output (it is replaced, not passed through).
#include "history/json.h"

#include <nlohmann/json.hpp>

#include "history/text.h"

namespace pgwarden::history {

void appendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t i = 0;
  // Validate and copy in runs: escape control characters, quote and backslash; replace any
  // malformed byte with U+FFFD.
  while (i < s.size()) {
    // A run of printable ASCII but the quote and the backslash (nearly all of a text) in one go.
    size_t run = i;
    while (run < s.size()) {
      const auto r = static_cast<unsigned char>(s[run]);
      if (r < 0x20 || r >= 0x7f || r == '"' || r == '\\') break;
      ++run;
    }
    if (run > i) {
      out.append(s.data() + i, run - i);
      i = run;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t len = utf8SequenceLength(s.substr(i));
      if (len == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.substr(i, len));
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xf]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
}

namespace {

// A scanner for the JSON the daemon writes into guard_actions (ASCII, shallow, short numbers, no
// \u escapes): it allocates nothing, where nlohmann's parser allocates about ten times per
// record. It answers true only for text that is certainly one JSON value; anything it does not
// handle (non-ASCII bytes, \u escapes, deep nesting, long numbers) or rejects goes to nlohmann,
// so the answer is always nlohmann's.
class QuickJson {
 public:
  explicit QuickJson(std::string_view t) : t_(t) {}
  bool surelyValid() {
    ws();
    if (!value(0)) return false;
    ws();
    return i_ == t_.size();
  }

 private:
  static constexpr int kMaxDepth = 32;
  bool more() const { return i_ < t_.size(); }
  char peek() const { return t_[i_]; }
  void ws() {
    while (more() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++i_;
  }
  bool literal(std::string_view word) {
    if (t_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool string() {
    ++i_;  // opening quote
    while (more()) {
      const auto c = static_cast<unsigned char>(t_[i_++]);
      if (c == '"') return true;
      if (c < 0x20 || c >= 0x80) return false;
      if (c == '\\') {
        if (!more()) return false;
        const char e = t_[i_++];
        if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
          return false;
        }
      }
    }
    return false;
  }
  bool digits(size_t max) {
    const size_t from = i_;
    while (more() && peek() >= '0' && peek() <= '9') ++i_;
    return i_ > from && i_ - from <= max;
  }
  bool number() {
    if (peek() == '-') ++i_;
    if (!more()) return false;
    if (peek() == '0') {
      ++i_;
    } else if (!digits(15)) {
      return false;
    }
    if (more() && peek() == '.') {
      ++i_;
      if (!digits(15)) return false;
    }
    return !more() || (peek() != 'e' && peek() != 'E' && !(peek() >= '0' && peek() <= '9'));
  }
  bool value(int depth) {
    if (!more() || depth > kMaxDepth) return false;
    switch (peek()) {
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      case '[': {
        ++i_;
        ws();
        if (more() && peek() == ']') return ++i_, true;
        for (;;) {
          if (!value(depth + 1)) return false;
          ws();
          if (!more()) return false;
          if (peek() == ']') return ++i_, true;
          if (peek() != ',') return false;
          ++i_;
          ws();
        }
      }
      case '{': {
        ++i_;
        ws();
        if (more() && peek() == '}') return ++i_, true;
        for (;;) {
          if (!more() || peek() != '"' || !string()) return false;
          ws();
          if (!more() || peek() != ':') return false;
          ++i_;
          ws();
          if (!value(depth + 1)) return false;
          ws();
          if (!more()) return false;
          if (peek() == '}') return ++i_, true;
          if (peek() != ',') return false;
          ++i_;
          ws();
        }
      }
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
        return false;
    }
  }

  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace

bool isJsonValue(std::string_view text) {
  if (QuickJson(text).surelyValid()) return true;
  // accept() reports failure by its return value, never by throwing.
  return nlohmann::json::accept(text.begin(), text.end());
}

void JsonWriter::separate() {
  if (need_comma_) out_.push_back(',');
  need_comma_ = true;
}

JsonWriter& JsonWriter::beginObject() {
  separate();
  out_.push_back('{');
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  out_.push_back('}');
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  separate();
  out_.push_back('[');
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  out_.push_back(']');
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  separate();
  appendJsonString(out_, k);
  out_.push_back(':');
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::string(std::string_view v) {
  separate();
  appendJsonString(out_, v);
  return *this;
}

JsonWriter& JsonWriter::number(int64_t v) {
  separate();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::boolean(bool v) {
  separate();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  separate();
  out_.append(json);
  return *this;
}

void JsonWriter::clear() {
  out_.clear();
  need_comma_ = false;
}

}  // namespace pgwarden::history
