// The tool-argument JSON Schema subset (see json_schema.h): compile() turns an operator's schema
// into a tree of Nodes, refusing anything it would not enforce; validate() walks that tree over a
// call's arguments and writes each violation for the model that has to fix its call.
#include "mcp/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "mcp/json_formats.h"
#include "mcp/json_pattern.h"

namespace pgwarden::mcp {

namespace {

// A value matched against a pattern is at most this long: JsonPattern's depth and heap limits
// are sized for it, so an ordinary pattern never hits them on a value that passes this check.
constexpr size_t kMaxPatternSubject = 1024;
// A value quoted back in a message is cut here: the model needs to recognise it, not reread it.
constexpr size_t kMaxEcho = 80;
// Schemas nest no deeper than the JSON the transport accepts.
constexpr int kMaxSchemaDepth = kMaxJsonDepth;

enum TypeBit : unsigned {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kNumber = 16,
  kString = 32,
  kInteger = 64,
};

constexpr std::pair<std::string_view, unsigned> kTypeNames[] = {
    {"null", kNull},     {"boolean", kBoolean}, {"object", kObject},   {"array", kArray},
    {"number", kNumber}, {"string", kString},   {"integer", kInteger},
};

// One compiled schema object. Defined here rather than as JsonSchema::Node itself because the
// file-local compiler and validator below may not name a private nested type.
struct SchemaNode {
  unsigned types = 0;  // TypeBit mask; 0: any type
  std::vector<std::string> typeNames;
  std::vector<std::pair<std::string, std::shared_ptr<const SchemaNode>>> properties;  // as written
  bool closed = false;  // additionalProperties: false
  std::vector<std::string> required;
  std::optional<Json> enumValues;  // an array
  std::optional<Json> constValue;
  // Bounds kept as the JSON numbers written, so they compare exactly with integer arguments.
  std::optional<Json> minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf;
  std::optional<size_t> minLength, maxLength, minItems, maxItems;
  bool uniqueItems = false;
  std::optional<JsonPattern> pattern;
  std::optional<StringFormat> format;
  std::shared_ptr<const SchemaNode> items;
  std::optional<Json> defaultValue;
};

using Node = SchemaNode;

// ---- JSON helpers -------------------------------------------------------------------------

// Exact comparison of two JSON numbers (-1, 0, 1): int64, uint64 and double mixed without the
// rounding a cast to double would bring to integers beyond 2^53.
int compareIntDouble(int64_t i, double d) {
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  double f = std::floor(d);
  auto fi = static_cast<int64_t>(f);
  if (i != fi) return i < fi ? -1 : 1;
  return d > f ? -1 : 0;
}

int compareUintDouble(uint64_t u, double d) {
  if (d >= 18446744073709551616.0) return -1;
  if (d < 0) return 1;
  double f = std::floor(d);
  auto fu = static_cast<uint64_t>(f);
  if (u != fu) return u < fu ? -1 : 1;
  return d > f ? -1 : 0;
}

int compareNumbers(const Json& a, const Json& b) {
  using V = Json::value_t;
  auto cmp = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  V ta = a.type(), tb = b.type();
  if (ta == V::number_float && tb == V::number_float) return cmp(a.get<double>(), b.get<double>());
  if (ta == V::number_float) return -compareNumbers(b, a);
  // a is an integer from here on.
  if (tb == V::number_float) {
    return ta == V::number_unsigned ? compareUintDouble(a.get<uint64_t>(), b.get<double>())
                                    : compareIntDouble(a.get<int64_t>(), b.get<double>());
  }
  if (ta == V::number_unsigned && tb == V::number_unsigned)
    return cmp(a.get<uint64_t>(), b.get<uint64_t>());
  if (ta == V::number_integer && tb == V::number_integer)
    return cmp(a.get<int64_t>(), b.get<int64_t>());
  if (ta == V::number_unsigned) return -compareNumbers(b, a);
  // a signed, b unsigned
  int64_t i = a.get<int64_t>();
  if (i < 0) return -1;
  return cmp(static_cast<uint64_t>(i), b.get<uint64_t>());
}

// JSON Schema's equality: numbers by value (1 == 1.0), objects regardless of key order. Two
// arguments compared by uniqueItems may both nest arbitrarily deep when built outside the
// transport (which caps depth at kMaxJsonDepth); past a few times that, they count as different
// rather than risking the stack.
bool jsonEqual(const Json& a, const Json& b, int depth = 0) {
  if (depth > 4 * kMaxJsonDepth) return false;
  if (a.is_number() && b.is_number()) return compareNumbers(a, b) == 0;
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!jsonEqual(a[i], b[i], depth + 1)) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !jsonEqual(*it, *other, depth + 1)) return false;
    }
    return true;
  }
  return a == b;
}

bool isInteger(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool hasType(const Json& v, unsigned types) {
  if (types == 0) return true;
  if ((types & kNull) && v.is_null()) return true;
  if ((types & kBoolean) && v.is_boolean()) return true;
  if ((types & kObject) && v.is_object()) return true;
  if ((types & kArray) && v.is_array()) return true;
  if ((types & kNumber) && v.is_number()) return true;
  if ((types & kString) && v.is_string()) return true;
  return (types & kInteger) && isInteger(v);
}

double toDouble(const Json& v) {
  if (v.is_number_unsigned()) return static_cast<double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<double>(v.get<int64_t>());
  return v.get<double>();
}

// `value` a multiple of `divisor` (> 0). Integers are checked exactly; otherwise in doubles with
// a relative tolerance, since 0.0075 / 0.0001 is 74.99999999999999 in binary floating point.
bool isMultipleOf(const Json& value, const Json& divisor) {
  if (value.is_number_integer() && divisor.is_number_integer()) {
    // compile() made the divisor positive; nlohmann holds it as signed or unsigned by accident of
    // parsing, so both sides are compared as magnitudes.
    auto magnitude = [](const Json& j) {
      if (j.is_number_unsigned()) return j.get<uint64_t>();
      int64_t i = j.get<int64_t>();
      return i < 0 ? uint64_t{0} - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    };
    return magnitude(value) % magnitude(divisor) == 0;
  }
  double q = toDouble(value) / toDouble(divisor);
  if (!std::isfinite(q)) return false;
  double r = std::round(q);
  return std::fabs(q - r) <= 1e-9 * std::max(1.0, std::fabs(q));
}

size_t codePoints(const std::string& s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

// At most kMaxEcho bytes of `s`, cut on a UTF-8 boundary so the message stays valid JSON text.
std::string truncate(const std::string& s) {
  if (s.size() <= kMaxEcho) return s;
  size_t cut = kMaxEcho - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

// A string as JSON text, from at most kMaxEcho of its bytes ("..." inside the quotes when cut);
// bytes that are not UTF-8 become U+FFFD, so the message built from it can always be serialised.
std::string quote(const std::string& s) {
  return Json(truncate(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Writes `v` as JSON text until `out` holds about kMaxEcho bytes: an argument may be megabytes
// or thousands of levels deep, and only its start is shown, so only its start is walked.
void echoInto(const Json& v, std::string& out, int depth) {
  if (v.is_string()) {
    out += quote(v.get_ref<const std::string&>());
  } else if (!v.is_structured()) {
    out += v.dump();
  } else if (depth >= 8) {
    out += v.is_array() ? "[...]" : "{...}";
  } else {
    out += v.is_array() ? '[' : '{';
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (out.size() > kMaxEcho) break;
      if (it != v.begin()) out += ", ";
      if (v.is_object()) out += quote(it.key()) + ": ";
      echoInto(*it, out, depth + 1);
    }
    out += v.is_array() ? ']' : '}';
  }
}

// A value as a message quotes it: JSON text, cut to kMaxEcho.
std::string echo(const Json& v) {
  if (v.is_string()) return quote(v.get_ref<const std::string&>());
  std::string out;
  echoInto(v, out, 0);
  return truncate(out);
}

// "a string \"ten\"", "null", "an object": what the model sent, in a few words.
std::string describe(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case Json::value_t::object:
      return "an object " + echo(v);
    case Json::value_t::array:
      return "an array " + echo(v);
    case Json::value_t::string:
      return "a string " + echo(v);
    default:
      return "the number " + echo(v);
  }
}

// An enum value as a list shows it: strings bare (they read as the words to send), others as JSON.
std::string listValue(const Json& v) {
  return v.is_string() ? truncate(v.get<std::string>()) : echo(v);
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string escapePointer(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// ---- compile ------------------------------------------------------------------------------

class Compiler {
 public:
  std::shared_ptr<const Node> compile(const Json& s, const std::string& at, int depth) {
    if (!error_.empty()) return nullptr;
    if (depth > kMaxSchemaDepth) return fail(at, "the schema nests too deeply");
    if (s.is_boolean())
      return fail(at, "boolean schemas are not supported; write {} or a schema object");
    if (!s.is_object()) return fail(at, "a schema must be an object");
    auto node = std::make_shared<Node>();
    for (auto it = s.begin(); it != s.end() && error_.empty(); ++it)
      keyword(*node, it.key(), *it, at + "/" + escapePointer(it.key()), depth);
    if (!error_.empty()) return nullptr;
    if (node->minLength && node->maxLength && *node->minLength > *node->maxLength)
      return fail(at, "minLength is greater than maxLength; no string would pass");
    if (node->minItems && node->maxItems && *node->minItems > *node->maxItems)
      return fail(at, "minItems is greater than maxItems; no array would pass");
    return node;
  }

  const std::string& error() const { return error_; }

 private:
  std::nullptr_t fail(const std::string& at, const std::string& why) {
    if (error_.empty()) error_ = (at.empty() ? "(root)" : at) + ": " + why;
    return nullptr;
  }

  void keyword(Node& n, const std::string& k, const Json& v, const std::string& at, int depth) {
    if (k == "type") return type(n, v, at);
    if (k == "properties") {
      if (!v.is_object()) return void(fail(at, "properties must be an object of schemas"));
      for (auto it = v.begin(); it != v.end(); ++it) {
        auto child = compile(*it, at + "/" + escapePointer(it.key()), depth + 1);
        if (!child) return;
        n.properties.emplace_back(it.key(), std::move(child));
      }
      return;
    }
    if (k == "additionalProperties") {
      if (!v.is_boolean())
        return void(fail(at,
                         "additionalProperties must be true or false; a schema here is not "
                         "supported"));
      n.closed = !v.get<bool>();
      return;
    }
    if (k == "required") {
      if (!v.is_array()) return void(fail(at, "required must be an array of property names"));
      for (const auto& r : v) {
        if (!r.is_string()) return void(fail(at, "required must be an array of property names"));
        n.required.push_back(r.get<std::string>());
      }
      return;
    }
    if (k == "enum") {
      if (!v.is_array() || v.empty()) return void(fail(at, "enum must be a non-empty array"));
      n.enumValues = v;
      return;
    }
    if (k == "const") return void(n.constValue = v);
    if (k == "default") return void(n.defaultValue = v);
    if (k == "minimum") return number(n.minimum, v, at, k);
    if (k == "maximum") return number(n.maximum, v, at, k);
    if (k == "exclusiveMinimum") return number(n.exclusiveMinimum, v, at, k);
    if (k == "exclusiveMaximum") return number(n.exclusiveMaximum, v, at, k);
    if (k == "multipleOf") {
      number(n.multipleOf, v, at, k);
      if (n.multipleOf && compareNumbers(*n.multipleOf, Json(0)) <= 0)
        fail(at, "multipleOf must be greater than 0");
      return;
    }
    if (k == "minLength") return count(n.minLength, v, at, k);
    if (k == "maxLength") return count(n.maxLength, v, at, k);
    if (k == "minItems") return count(n.minItems, v, at, k);
    if (k == "maxItems") return count(n.maxItems, v, at, k);
    if (k == "uniqueItems") {
      if (!v.is_boolean()) return void(fail(at, "uniqueItems must be true or false"));
      n.uniqueItems = v.get<bool>();
      return;
    }
    if (k == "pattern") return pattern(n, v, at);
    if (k == "format") {
      if (!v.is_string()) return void(fail(at, "format must be a string"));
      n.format = parseStringFormat(v.get<std::string>());
      if (!n.format)
        fail(at, "unsupported format " + echo(v) +
                     "; the supported formats are date, date-time, time, uuid, email");
      return;
    }
    if (k == "items") {
      if (v.is_array())
        return void(fail(at,
                         "the array form of items (tuple validation) is not supported; "
                         "give one schema for every item"));
      n.items = compile(v, at, depth + 1);
      return;
    }
    if (k == "title" || k == "description" || k == "$schema" || k == "$comment") {
      if (!v.is_string()) fail(at, k + " must be a string");
      return;
    }
    if (k == "examples") {
      if (!v.is_array()) fail(at, "examples must be an array");
      return;
    }
    fail(at, "unsupported keyword " + quote(k));
  }

  void type(Node& n, const Json& v, const std::string& at) {
    auto one = [&](const Json& t) {
      if (!t.is_string()) {
        fail(at, "type must be a type name or an array of them");
        return false;
      }
      const auto& name = t.get_ref<const std::string&>();
      for (const auto& [tn, bit] : kTypeNames) {
        if (tn == name) {
          n.types |= bit;
          n.typeNames.push_back(name);
          return true;
        }
      }
      fail(at, "unknown type " + echo(t) +
                   "; the types are null, boolean, object, array, number, string, integer");
      return false;
    };
    if (v.is_array()) {
      if (v.empty()) return void(fail(at, "type must not be an empty array"));
      for (const auto& t : v)
        if (!one(t)) return;
    } else {
      one(v);
    }
  }

  void number(std::optional<Json>& slot, const Json& v, const std::string& at,
              const std::string& k) {
    if (!v.is_number()) return void(fail(at, k + " must be a number"));
    slot = v;
  }

  void count(std::optional<size_t>& slot, const Json& v, const std::string& at,
             const std::string& k) {
    if (!isInteger(v) || compareNumbers(v, Json(0)) < 0 ||
        compareNumbers(v, Json(uint64_t{1} << 53)) > 0)
      return void(fail(at, k + " must be a non-negative integer"));
    slot = static_cast<size_t>(toDouble(v));
  }

  void pattern(Node& n, const Json& v, const std::string& at) {
    if (!v.is_string()) return void(fail(at, "pattern must be a string"));
    auto compiled = JsonPattern::compile(v.get_ref<const std::string&>());
    if (!compiled)
      return void(fail(at, "invalid regular expression " + echo(v) + ": " + compiled.error()));
    n.pattern = std::move(compiled).value();
  }

  std::string error_;
};

// ---- validate -----------------------------------------------------------------------------

class Validator {
 public:
  explicit Validator(size_t limit) : limit_(limit) {}

  void run(const Node& n, const Json& v, const std::string& path) {
    if (full()) return;
    if (!hasType(v, n.types)) {
      Json expected = n.typeNames.size() == 1 ? Json(n.typeNames[0]) : Json(n.typeNames);
      std::string want;
      for (size_t i = 0; i < n.typeNames.size(); ++i)
        want +=
            (i == 0 ? "" : (i + 1 == n.typeNames.size() ? " or " : ", ")) + article(n.typeNames[i]);
      add(path, "type", subject(path) + " must be " + want + "; got " + describe(v),
          std::move(expected));
      return;  // the other rules would only repeat the mismatch
    }
    if (n.enumValues) checkEnum(n, v, path);
    if (n.constValue && !jsonEqual(v, *n.constValue))
      add(path, "const",
          subject(path) + " must be exactly " + echo(*n.constValue) + "; got " + echo(v),
          *n.constValue);
    if (v.is_number()) checkNumber(n, v, path);
    if (v.is_string()) checkString(n, v.get_ref<const std::string&>(), path);
    if (v.is_array()) checkArray(n, v, path);
    if (v.is_object()) checkObject(n, v, path);
  }

  std::vector<SchemaViolation> take() { return std::move(out_); }

  void add(const std::string& path, const char* keyword, std::string message, Json expected) {
    if (full()) return;
    out_.push_back({path, keyword, std::move(message), std::move(expected)});
  }

 private:
  bool full() const { return out_.size() >= limit_; }

  static std::string article(const std::string& type) {
    if (type == "null") return "null";
    bool vowel = type[0] == 'a' || type[0] == 'i' || type[0] == 'o';
    return (vowel ? "an " : "a ") + type;
  }

  // "\"from\"" for an argument, "\"filter/status\"" deeper down, "the arguments" for the root;
  // quoted as JSON so that a key with quotes or bytes that are not UTF-8 cannot garble the text.
  static std::string subject(const std::string& path) {
    return path.empty() ? "the arguments" : quote(path.substr(1));
  }

  void checkEnum(const Node& n, const Json& v, const std::string& path) {
    for (const auto& e : *n.enumValues)
      if (jsonEqual(v, e)) return;
    std::string list;
    for (const auto& e : *n.enumValues) {
      if (list.size() > 400) {
        list += ", ...";
        break;
      }
      list += (list.empty() ? "" : ", ") + listValue(e);
    }
    add(path, "enum", subject(path) + " must be one of " + list + "; got " + echo(v),
        *n.enumValues);
  }

  void checkNumber(const Node& n, const Json& v, const std::string& path) {
    struct Bound {
      const std::optional<Json>& bound;
      const char* keyword;
      const char* words;
      bool (*passes)(int);
    };
    const Bound bounds[] = {
        {n.minimum, "minimum", "at least", [](int c) { return c >= 0; }},
        {n.maximum, "maximum", "at most", [](int c) { return c <= 0; }},
        {n.exclusiveMinimum, "exclusiveMinimum", "greater than", [](int c) { return c > 0; }},
        {n.exclusiveMaximum, "exclusiveMaximum", "less than", [](int c) { return c < 0; }},
    };
    for (const auto& b : bounds) {
      if (b.bound && !b.passes(compareNumbers(v, *b.bound)))
        add(path, b.keyword,
            subject(path) + " must be " + b.words + " " + echo(*b.bound) + "; got " + echo(v),
            *b.bound);
    }
    if (n.multipleOf && !isMultipleOf(v, *n.multipleOf))
      add(path, "multipleOf",
          subject(path) + " must be a multiple of " + echo(*n.multipleOf) + "; got " + echo(v),
          *n.multipleOf);
  }

  void checkString(const Node& n, const std::string& s, const std::string& path) {
    size_t len = (n.minLength || n.maxLength || n.pattern) ? codePoints(s) : 0;
    auto chars = [](size_t k) {
      return std::to_string(k) + (k == 1 ? " character" : " characters");
    };
    if (n.minLength && len < *n.minLength)
      add(path, "minLength",
          subject(path) + " must be at least " + chars(*n.minLength) + " long; got " + chars(len) +
              " (" + quote(s) + ")",
          *n.minLength);
    if (n.maxLength && len > *n.maxLength)
      add(path, "maxLength",
          subject(path) + " must be at most " + chars(*n.maxLength) + " long; got " + chars(len) +
              " (" + quote(s) + ")",
          *n.maxLength);
    if (n.pattern) matchPattern(n, s, len, path);
    if (n.format && !matchesFormat(*n.format, s))
      add(path, "format",
          subject(path) + " must be " + std::string(formatDescription(*n.format)) + "; got " +
              quote(s),
          std::string(formatName(*n.format)));
  }

  void matchPattern(const Node& n, const std::string& s, size_t len, const std::string& path) {
    if (len > kMaxPatternSubject) {
      add(path, "pattern",
          subject(path) + " is " + std::to_string(len) + " characters long; a value checked " +
              "against a pattern may be at most " + std::to_string(kMaxPatternSubject) +
              " characters, so send a shorter one",
          kMaxPatternSubject);
      return;
    }
    const std::string& source = n.pattern->source();
    switch (n.pattern->search(s)) {
      case JsonPattern::Outcome::kMatch:
        return;
      case JsonPattern::Outcome::kNoMatch:
        return add(path, "pattern",
                   subject(path) + " must match the regular expression " + quote(source) +
                       "; got " + quote(s),
                   source);
      case JsonPattern::Outcome::kLimit:
        return add(
            path, "pattern",
            subject(path) + " could not be checked against the pattern " + quote(source) +
                ": the match limit was reached (the pattern backtracks too much on this value); " +
                "send a shorter or simpler value",
            source);
      case JsonPattern::Outcome::kBadSubject:
        return add(path, "pattern",
                   subject(path) + " could not be checked against the pattern " + quote(source) +
                       " (not valid UTF-8); send the value as valid UTF-8 text",
                   source);
    }
  }

  void checkArray(const Node& n, const Json& v, const std::string& path) {
    auto items = [](size_t k) { return std::to_string(k) + (k == 1 ? " item" : " items"); };
    if (n.minItems && v.size() < *n.minItems)
      add(path, "minItems",
          subject(path) + " must have at least " + items(*n.minItems) + "; got " + items(v.size()),
          *n.minItems);
    if (n.maxItems && v.size() > *n.maxItems)
      add(path, "maxItems",
          subject(path) + " must have at most " + items(*n.maxItems) + "; got " + items(v.size()),
          *n.maxItems);
    if (n.uniqueItems) {
      // Quadratic, but arguments are small and numbers must compare by value (1 == 1.0), which a
      // hash of the JSON text would not do.
      bool repeated = false;
      for (size_t i = 0; i < v.size() && !repeated; ++i) {
        for (size_t j = i + 1; j < v.size() && !repeated; ++j) {
          if (jsonEqual(v[i], v[j])) {
            repeated = true;
            add(path, "uniqueItems",
                subject(path) + " must not repeat items; items " + std::to_string(i) + " and " +
                    std::to_string(j) + " are both " + echo(v[i]),
                true);
          }
        }
      }
    }
    if (n.items)
      for (size_t i = 0; i < v.size() && !full(); ++i)
        run(*n.items, v[i], path + "/" + std::to_string(i));
  }

  void checkObject(const Node& n, const Json& v, const std::string& path) {
    // "argument" at the top, "field" inside a nested object, so the model knows where to look.
    std::string what = path.empty() ? "argument" : "field";
    std::string where = path.empty() ? "" : " in " + subject(path);
    for (const auto& r : n.required)
      if (!v.contains(r))
        add(path + "/" + escapePointer(r), "required",
            "missing required " + what + " " + quote(r) + where, n.required);
    for (auto it = v.begin(); it != v.end() && !full(); ++it) {
      std::string at = path + "/" + escapePointer(it.key());
      auto p = std::find_if(n.properties.begin(), n.properties.end(),
                            [&](const auto& e) { return e.first == it.key(); });
      if (p != n.properties.end()) {
        run(*p->second, *it, at);
      } else if (n.closed) {
        std::vector<std::string> names;
        for (const auto& e : n.properties) names.push_back(e.first);
        std::string list =
            names.empty() ? "it takes none" : "the " + what + "s are: " + joinNames(names);
        add(at, "additionalProperties",
            "unknown " + what + " " + quote(it.key()) + where + "; " + list, names);
      }
    }
  }

  size_t limit_;
  std::vector<SchemaViolation> out_;
};

Json fillDefaults(const Node& n, const Json& v) {
  if (v.is_object()) {
    Json out = v;
    for (const auto& [name, child] : n.properties) {
      auto it = out.find(name);
      if (it != out.end()) {
        *it = fillDefaults(*child, *it);
      } else if (child->defaultValue) {
        out[name] = fillDefaults(*child, *child->defaultValue);
      }
    }
    return out;
  }
  if (v.is_array() && n.items) {
    Json out = Json::array();
    for (const auto& e : v) out.push_back(fillDefaults(*n.items, e));
    return out;
  }
  return v;
}

}  // namespace

struct JsonSchema::Node : SchemaNode {
  explicit Node(SchemaNode n) : SchemaNode(std::move(n)) {}
};

Result<JsonSchema> JsonSchema::compile(const Json& schema) {
  Compiler c;
  std::shared_ptr<const SchemaNode> root;
  try {
    root = c.compile(schema, "", 0);
  } catch (const std::exception& e) {
    return Result<JsonSchema>::fail(std::string("(root): ") + e.what());
  }
  if (!root) return Result<JsonSchema>::fail(c.error());
  JsonSchema s;
  s.root_ = std::make_shared<const Node>(*root);
  s.source_ = std::make_shared<const Json>(schema);
  return s;
}

std::vector<SchemaViolation> JsonSchema::validate(const Json& instance, size_t limit) const {
  if (!root_ || limit == 0) return {};
  Validator v(limit);
  try {
    v.run(*root_, instance, "");
  } catch (const std::exception& e) {
    // A bug of ours, not the caller's: still a refusal, never a crash or a silent pass.
    v.add("", "internal", std::string("the arguments could not be checked: ") + e.what(), nullptr);
  } catch (...) {
    v.add("", "internal", "the arguments could not be checked", nullptr);
  }
  return v.take();
}

Json JsonSchema::withDefaults(const Json& instance) const {
  if (!root_) return instance;
  try {
    return fillDefaults(*root_, instance);
  } catch (...) {
    return instance;
  }
}

const Json& JsonSchema::source() const {
  static const Json kNull;
  return source_ ? *source_ : kNull;
}

std::vector<std::string> JsonSchema::propertyNames() const {
  std::vector<std::string> names;
  if (root_)
    for (const auto& p : root_->properties) names.push_back(p.first);
  return names;
}

std::string JsonSchema::propertyType(const std::string& name) const {
  if (!root_) return "";
  for (const auto& [n, child] : root_->properties)
    if (n == name) return child->typeNames.size() == 1 ? child->typeNames[0] : "";
  return "";
}

}  // namespace pgwarden::mcp

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
