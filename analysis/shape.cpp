// The shape lexer: one pass over the text that copies everything but literal constants into the
// key and replaces each constant by a marker. It follows PostgreSQL's scanner (scan.l) only as far
// as it needs to, and gives up ("not shape-cacheable") wherever the two could disagree.
#include "analysis/shape.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "common/ascii.h"

namespace pgwarden::analysis {

namespace {

// What each byte may be, as PostgreSQL's scanner sees it: a table built once from the rules
// below, so that the lexer's per-byte tests are one load each.
enum CharClass : uint8_t {
  kDigitClass = 1,
  kAlphaClass = 2,       // ASCII letters
  kIdentStartClass = 4,  // letters, '_', and any byte >= 0x80
  kIdentCharClass = 8,   // an identifier's later bytes: also digits and '$'
  kSpaceClass = 16,
  kPunctClass = 32,      // PostgreSQL's `self` and operator characters, minus ':' (psql variables)
  kTextClass = 64,       // inside a string, comment or quoted identifier: not a control character
};

constexpr std::array<uint8_t, 256> makeCharClasses() {
  std::array<uint8_t, 256> t{};
  constexpr std::string_view kPunct = ",()[].;+-*/%^<>=~!@#&|`?";
  for (int i = 0; i < 256; ++i) {
    const auto c = static_cast<char>(i);
    uint8_t f = 0;
    const bool digit = c >= '0' && c <= '9';
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool ident_start = alpha || c == '_' || i >= 0x80;
    if (digit) f |= kDigitClass;
    if (alpha) f |= kAlphaClass;
    if (ident_start) f |= kIdentStartClass;
    if (ident_start || digit || c == '$') f |= kIdentCharClass;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') f |= kSpaceClass;
    if (i != 0 && kPunct.find(c) != std::string_view::npos) f |= kPunctClass;
    if (i >= 0x20 || c == '\t' || c == '\n' || c == '\r') f |= kTextClass;
    t[static_cast<size_t>(i)] = f;
  }
  return t;
}

constexpr std::array<uint8_t, 256> kCharClasses = makeCharClasses();

bool hasClass(char c, uint8_t cls) { return (kCharClasses[static_cast<unsigned char>(c)] & cls) != 0; }
bool shapeDigit(char c) { return hasClass(c, kDigitClass); }
bool shapeAsciiAlpha(char c) { return hasClass(c, kAlphaClass); }
bool shapeIdentStart(char c) { return hasClass(c, kIdentStartClass); }
bool shapeIdentChar(char c) { return hasClass(c, kIdentCharClass); }
bool shapeSpace(char c) { return hasClass(c, kSpaceClass); }
bool shapePunct(char c) { return hasClass(c, kPunctClass); }
bool shapeTextByte(char c) { return hasClass(c, kTextClass); }

ValueCategory stringCategory(std::string_view v) {
  if (v.empty()) return ValueCategory::kEmpty;
  if (v.find_first_not_of('%') == std::string_view::npos) return ValueCategory::kPercents;
  if (v == ".*") return ValueCategory::kDotStar;
  if (v.find_first_of("%_\\") != std::string_view::npos) return ValueCategory::kWildcard;
  return ValueCategory::kPlain;
}

ValueCategory numberCategory(double v) {
  if (v == 0) return ValueCategory::kZero;
  if (v < 100) return ValueCategory::kSmall;
  return ValueCategory::kPlain;
}

// The parser may reject bytes that are not UTF-8 where this lexer would not notice: such texts
// are analysed the exact way.
bool validUtf8(std::string_view s) {
  size_t i = 0;
  // Eight ASCII bytes at a time: most texts are ASCII throughout.
  while (i + 8 <= s.size()) {
    uint64_t word = 0;
    std::memcpy(&word, s.data() + i, sizeof word);
    if ((word & 0x8080808080808080ULL) != 0) break;
    i += 8;
  }
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (no overlongs, no surrogates)
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    const auto second = static_cast<unsigned char>(s[i + 1]);
    if (second < lo || second > hi) return false;
    for (size_t k = 2; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

class ShapeLexer {
 public:
  ShapeLexer(std::string_view sql, Shape& out) : sql_(sql), out_(out) {}

  bool run() {
    out_.key.clear();
    out_.literals.clear();
    if (!validUtf8(sql_)) return false;
    out_.key.reserve(sql_.size());
    while (i_ < sql_.size()) {
      if (!step()) return false;
    }
    out_.key.append(sql_.substr(flushed_));
    return true;
  }

 private:
  char at(size_t j) const { return j < sql_.size() ? sql_[j] : '\0'; }

  bool step() {
    const char c = sql_[i_];
    const char next = at(i_ + 1);
    if (shapeSpace(c)) {
      ++i_;
      return true;
    }
    if (c == '-' && next == '-') return lineComment();
    if (c == '/' && next == '*') return blockComment();
    if (c == '\'') return quoted(i_, i_, LiteralClass::kString);
    if (c == '"') return quotedIdentifier();
    if (shapeDigit(c) || (c == '.' && shapeDigit(next))) return number();
    if (c == '$') return dollar();
    if (shapeIdentStart(c)) return word();
    if (c == ':') {
      // `::` casts and `:=` named arguments; `:name`, `:'name'`, `:{?name}` are psql's.
      if (next == ':') {
        i_ += 2;
        return true;
      }
      if (shapeIdentStart(next) || next == '\'' || next == '"' || next == '{') return false;
      ++i_;
      return true;
    }
    if (shapePunct(c)) {
      ++i_;
      return true;
    }
    return false;  // backslash, braces, control characters, ...
  }

  bool lineComment() {
    size_t j = i_;
    while (j < sql_.size() && sql_[j] != '\n') {
      if (!shapeTextByte(sql_[j])) return false;
      ++j;
    }
    i_ = j;
    return true;
  }

  bool blockComment() {
    size_t j = i_ + 2;
    int depth = 1;
    while (depth > 0) {
      if (j + 1 >= sql_.size()) return false;  // unterminated
      if (sql_[j] == '/' && sql_[j + 1] == '*') {
        ++depth;
        j += 2;
      } else if (sql_[j] == '*' && sql_[j + 1] == '/') {
        --depth;
        j += 2;
      } else {
        if (!shapeTextByte(sql_[j])) return false;
        ++j;
      }
    }
    i_ = j;
    return true;
  }

  // A "quoted" identifier (its opening quote at i_), kept verbatim like the rest of the text.
  bool quotedIdentifier() {
    size_t j = i_ + 1;
    while (true) {
      if (j >= sql_.size() || !shapeTextByte(sql_[j])) return false;
      if (sql_[j] == '"') {
        if (at(j + 1) != '"') break;
        j += 2;
        continue;
      }
      ++j;
    }
    if (j == i_ + 1) return false;  // "" is a zero-length identifier: an error
    i_ = j + 1;
    return true;
  }

  // A quoted literal whose opening quote is at `quote` (its prefix, if any, starts at `start`).
  bool quoted(size_t start, size_t quote, LiteralClass cls) {
    std::string value;
    size_t j = quote + 1;
    while (true) {
      if (j >= sql_.size() || !shapeTextByte(sql_[j])) return false;
      const char ch = sql_[j];
      if (ch == '\'') {
        if (at(j + 1) != '\'') break;
        if (cls == LiteralClass::kBitB || cls == LiteralClass::kBitX) return false;
        value += '\'';
        j += 2;
        continue;
      }
      if (ch == '\\') {
        // Plain and U& strings: a backslash means standard_conforming_strings matters, or a U&
        // escape; E'' strings: only \\ and \' are decoded here.
        if (cls != LiteralClass::kEString) return false;
        const char esc = at(j + 1);
        if (esc != '\\' && esc != '\'') return false;
        value += esc;
        j += 2;
        continue;
      }
      if (cls == LiteralClass::kBitB && ch != '0' && ch != '1') return false;
      if (cls == LiteralClass::kBitX && !shapeDigit(ch) && !((ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'))) {
        return false;
      }
      value += ch;
      ++j;
    }
    const size_t end = j + 1;
    if (continuedString(end)) return false;
    if (cls == LiteralClass::kBitB) value.insert(0, "b");
    if (cls == LiteralClass::kBitX) value.insert(0, "x");
    i_ = end;
    return literal(cls, start, end, std::move(value), 0);
  }

  // 'a'<newline>'b' is one constant to PostgreSQL: refuse rather than model it.
  bool continuedString(size_t j) const {
    while (j < sql_.size()) {
      if (shapeSpace(sql_[j])) {
        ++j;
      } else if (sql_[j] == '-' && at(j + 1) == '-') {
        while (j < sql_.size() && sql_[j] != '\n') ++j;
      } else if (sql_[j] == '/' && at(j + 1) == '*') {
        return true;  // not worth modelling: treat as a possible continuation
      } else {
        break;
      }
    }
    return j < sql_.size() && sql_[j] == '\'';
  }

  bool number() {
    size_t j = i_;
    while (shapeDigit(at(j))) ++j;
    bool is_float = false;
    if (at(j) == '.') {
      if (at(j + 1) == '.') return false;  // 1..2
      is_float = true;
      ++j;
      while (shapeDigit(at(j))) ++j;
    }
    if (at(j) == 'e' || at(j) == 'E') {
      size_t k = j + 1;
      if (at(k) == '+' || at(k) == '-') ++k;
      if (!shapeDigit(at(k))) return false;  // 1e, 1e+: trailing junk
      while (shapeDigit(at(k))) ++k;
      j = k;
      is_float = true;
    }
    if (j < sql_.size() && (shapeIdentChar(sql_[j]) || sql_[j] == '.')) return false;
    std::string text(sql_.substr(i_, j - i_));
    const size_t start = i_;
    i_ = j;
    if (is_float) {
      const double v = std::strtod(text.c_str(), nullptr);
      return literal(LiteralClass::kFloat, start, j, std::move(text), v);
    }
    if (text.size() > 1 && text[0] == '0') return false;  // 007: the parser's text would be "7"
    // Digits only: up to 18 of them are an exact int64, and its double is the one strtod gives.
    double v = 0;
    bool fits = false;
    if (text.size() <= 18) {
      int64_t n = 0;
      for (const char c : text) n = n * 10 + (c - '0');
      v = static_cast<double>(n);
      fits = n <= 2147483647LL;
    } else {
      v = std::strtod(text.c_str(), nullptr);
    }
    return literal(fits ? LiteralClass::kInteger : LiteralClass::kBigInteger, start, j,
                   std::move(text), v);
  }

  bool dollar() {
    const char next = at(i_ + 1);
    if (shapeDigit(next)) {  // a parameter: $1
      size_t j = i_ + 1;
      while (shapeDigit(at(j))) ++j;
      if (j < sql_.size() && shapeIdentChar(sql_[j])) return false;
        i_ = j;
      return true;
    }
    size_t j = i_ + 1;
    if (next != '$') {
      if (!shapeAsciiAlpha(next) && next != '_') return false;
      while (shapeAsciiAlpha(at(j)) || shapeDigit(at(j)) || at(j) == '_') ++j;
      if (at(j) != '$') return false;
    }
    const std::string_view tag = sql_.substr(i_, j + 1 - i_);
    const size_t body = j + 1;
    const size_t close = sql_.find(tag, body);
    if (close == std::string_view::npos) return false;
    for (size_t k = body; k < close; ++k) {
      if (!shapeTextByte(sql_[k])) return false;
    }
    const size_t start = i_;
    const size_t end = close + tag.size();
    if (end < sql_.size() && shapeIdentChar(sql_[end])) return false;
    i_ = end;
    return literal(LiteralClass::kDollar, start, end, std::string(sql_.substr(body, close - body)), 0);
  }

  bool word() {
    size_t j = i_;
    while (j < sql_.size() && shapeIdentChar(sql_[j])) ++j;
    const std::string_view w = sql_.substr(i_, j - i_);
    const char after = at(j);
    if (after == '\'' && w.size() == 1) {
      switch (w[0]) {
        case 'e': case 'E': return quoted(i_, j, LiteralClass::kEString);
        case 'b': case 'B': return quoted(i_, j, LiteralClass::kBitB);
        case 'x': case 'X': return quoted(i_, j, LiteralClass::kBitX);
        case 'n': case 'N': return false;  // national character strings
        default: break;
      }
    }
    if (after == '&' && w.size() == 1 && (w[0] == 'u' || w[0] == 'U')) {
      if (at(j + 1) == '\'') return quoted(i_, j + 1, LiteralClass::kUString);
      if (at(j + 1) == '"') {
        i_ = j + 1;
        return quotedIdentifier();
      }
    }
    if (iequals(w, "uescape")) return false;
    // float(p): the grammar picks float4 or float8 from p's value, which the shape cannot see.
    if (iequals(w, "float")) {
      size_t k = j;
      while (k < sql_.size() && shapeSpace(sql_[k])) ++k;
      if (at(k) == '(') return false;
    }
    i_ = j;
    return true;
  }

  bool literal(LiteralClass cls, size_t start, size_t end, std::string value, double number) {
    ShapeLiteral lit;
    lit.cls = cls;
    lit.offset = static_cast<uint32_t>(start);
    lit.length = static_cast<uint32_t>(end - start);
    switch (cls) {
      case LiteralClass::kInteger:
      case LiteralClass::kBigInteger:
      case LiteralClass::kFloat:
        lit.category = numberCategory(number);
        break;
      case LiteralClass::kString:
      case LiteralClass::kEString:
      case LiteralClass::kUString:
      case LiteralClass::kDollar:
      case LiteralClass::kBitB:
      case LiteralClass::kBitX:
        lit.category = stringCategory(value);
        break;
    }
    lit.number = number;
    lit.group = groupOf(cls, value);
    lit.value = std::move(value);
    // Everything between literals is kept verbatim.
    out_.key.append(sql_.substr(flushed_, start - flushed_));
    flushed_ = end;
    out_.key += '\x01';
    out_.key += static_cast<char>(cls);
    out_.key += static_cast<char>(lit.category);
    out_.key += std::to_string(lit.group);
    out_.key += '\x02';
    out_.literals.push_back(std::move(lit));
    return true;
  }

  // The group of a literal: that of an earlier one with the same node type and value, or a new
  // one. A scan for the usual few literals, a map once there are many.
  int groupOf(LiteralClass cls, const std::string& value) {
    static constexpr size_t kScanLimit = 16;
    const std::string_view node = literalNodeType(cls);
    if (out_.literals.size() < kScanLimit) {
      for (const ShapeLiteral& l : out_.literals) {
        if (l.value == value && literalNodeType(l.cls) == node) return l.group;
      }
      return groups_++;
    }
    if (group_index_.empty()) {
      for (const ShapeLiteral& l : out_.literals) group_index_.try_emplace(groupKey(l.cls, l.value), l.group);
    }
    const auto [it, fresh] = group_index_.try_emplace(groupKey(cls, value), groups_);
    if (fresh) ++groups_;
    return it->second;
  }

  static std::string groupKey(LiteralClass cls, const std::string& value) {
    std::string key(literalNodeType(cls));
    key += '\0';
    key += value;
    return key;
  }

  std::string_view sql_;
  Shape& out_;
  size_t i_ = 0;
  size_t flushed_ = 0;  // the key holds the text up to here
  int groups_ = 0;
  std::unordered_map<std::string, int> group_index_;
};

}  // namespace

std::string_view literalNodeType(LiteralClass cls) {
  switch (cls) {
    case LiteralClass::kInteger: return "Integer";
    case LiteralClass::kBigInteger:
    case LiteralClass::kFloat: return "Float";
    case LiteralClass::kString:
    case LiteralClass::kEString:
    case LiteralClass::kUString:
    case LiteralClass::kDollar: return "String";
    case LiteralClass::kBitB:
    case LiteralClass::kBitX: return "BitString";
  }
  return "";
}

bool lexShape(std::string_view sql, Shape& out) {
  return ShapeLexer(sql, out).run();
}

}  // namespace pgwarden::analysis
