// Constant decoding and structural comparison over libpg_query's JSON parse tree.
#include "analysis/pg_json.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace pgwarden::analysis::pgjson {

namespace {

ConstArg fromAConst(object body) {
  ConstArg c;
  object inner;
  if (getObject(body, "ival", inner)) {
    // {"ival": {}} is zero: libpg_query leaves out default values.
    c.type = ConstArg::Type::kInteger;
    c.number = static_cast<double>(int64(inner, "ival", 0));
    c.text = std::to_string(int64(inner, "ival", 0));
  } else if (getObject(body, "fval", inner)) {
    c.type = ConstArg::Type::kFloat;
    c.text = std::string(str(inner, "fval"));
    c.number = std::strtod(c.text.c_str(), nullptr);
  } else if (getObject(body, "sval", inner)) {
    c.type = ConstArg::Type::kString;
    c.text = std::string(str(inner, "sval"));
  } else if (getObject(body, "boolval", inner)) {
    c.type = ConstArg::Type::kBool;
    c.text = boolean(inner, "boolval") ? "true" : "false";
  } else if (getObject(body, "bsval", inner)) {
    c.type = ConstArg::Type::kString;
    c.text = std::string(str(inner, "bsval"));
  } else if (boolean(body, "isnull")) {
    c.type = ConstArg::Type::kNull;
  }
  return c;
}

}  // namespace

ConstArg constOf(element e) {
  Node n = asNode(e);
  if (n.type == "A_Const") return fromAConst(n.body);
  if (n.type == "TypeCast") {
    element arg;
    if (get(n.body, "arg", arg)) return constOf(arg);
    return {};
  }
  if (n.type == "A_Expr" && str(n.body, "kind") == "AEXPR_OP" && !has(n.body, "lexpr")) {
    // Unary minus/plus on a number: -5, +5.
    array names;
    element rexpr;
    if (!getArray(n.body, "name", names) || !get(n.body, "rexpr", rexpr)) return {};
    std::string_view op;
    for (element name : names) op = stringNode(name);
    ConstArg c = constOf(rexpr);
    if (c.type != ConstArg::Type::kInteger && c.type != ConstArg::Type::kFloat) return {};
    if (op == "-") {
      c.number = -c.number;
      c.text = "-" + c.text;
      return c;
    }
    if (op == "+") return c;
  }
  return {};
}

bool sameTree(element a, element b) {
  const auto ta = a.type();
  if (ta != b.type()) return false;
  switch (ta) {
    case simdjson::dom::element_type::OBJECT: {
      object oa, ob;
      if (a.get_object().get(oa) || b.get_object().get(ob)) return false;
      auto ia = oa.begin(), ib = ob.begin();
      while (true) {
        while (ia != oa.end() && ia.key() == "location") ++ia;
        while (ib != ob.end() && ib.key() == "location") ++ib;
        if (ia == oa.end() || ib == ob.end()) return ia == oa.end() && ib == ob.end();
        if (ia.key() != ib.key() || !sameTree(ia.value(), ib.value())) return false;
        ++ia;
        ++ib;
      }
    }
    case simdjson::dom::element_type::ARRAY: {
      array aa, ab;
      if (a.get_array().get(aa) || b.get_array().get(ab)) return false;
      auto ia = aa.begin(), ib = ab.begin();
      for (; ia != aa.end() && ib != ab.end(); ++ia, ++ib) {
        if (!sameTree(*ia, *ib)) return false;
      }
      return ia == aa.end() && ib == ab.end();
    }
    case simdjson::dom::element_type::STRING: {
      std::string_view sa, sb;
      return !a.get_string().get(sa) && !b.get_string().get(sb) && sa == sb;
    }
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE: {
      double da = 0, db = 0;
      return !a.get_double().get(da) && !b.get_double().get(db) && da == db;
    }
    case simdjson::dom::element_type::BOOL: {
      bool ba = false, bb = false;
      return !a.get_bool().get(ba) && !b.get_bool().get(bb) && ba == bb;
    }
    case simdjson::dom::element_type::NULL_VALUE:
      return true;
  }
  return false;
}


// ---- fingerprint ----

namespace {

// XXH3-64 (xxHash 0.8), scalar, one shot with a seed: what libpg_query's fingerprint hashes its
// token stream with (streaming XXH3 over the tokens equals one shot over their concatenation).
namespace xxh3 {

constexpr uint8_t kSecret[192] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};
constexpr uint64_t kP32_1 = 0x9E3779B1U, kP32_2 = 0x85EBCA77U, kP32_3 = 0xC2B2AE3DU;
constexpr uint64_t kP64_1 = 0x9E3779B185EBCA87ULL, kP64_2 = 0xC2B2AE3D27D4EB4FULL,
                   kP64_3 = 0x165667B19E3779F9ULL, kP64_4 = 0x85EBCA77C2B2AE63ULL,
                   kP64_5 = 0x27D4EB2F165667C5ULL;

uint64_t read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
uint64_t fold(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}
uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  return h ^ (h >> 32);
}
uint64_t xxh64Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kP64_2;
  h ^= h >> 29;
  h *= kP64_3;
  return h ^ (h >> 32);
}
uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl(h, 49) ^ rotl(h, 24);
  h *= 0x9FB21C651E98DF25ULL;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25ULL;
  return h ^ (h >> 28);
}
uint64_t mix16(const uint8_t* in, const uint8_t* s, uint64_t seed) {
  return fold(read64(in) ^ (read64(s) + seed), read64(in + 8) ^ (read64(s + 8) - seed));
}
void accumulate512(uint64_t* acc, const uint8_t* in, const uint8_t* s) {
  for (int i = 0; i < 8; ++i) {
    const uint64_t v = read64(in + 8 * i);
    const uint64_t k = v ^ read64(s + 8 * i);
    acc[i ^ 1] += v;
    acc[i] += (k & 0xFFFFFFFFULL) * (k >> 32);
  }
}

uint64_t hashLong(const uint8_t* in, size_t len, uint64_t seed) {
  uint8_t secret[sizeof kSecret];
  for (size_t i = 0; i < sizeof kSecret / 16; ++i) {
    const uint64_t lo = read64(kSecret + 16 * i) + seed;
    const uint64_t hi = read64(kSecret + 16 * i + 8) - seed;
    std::memcpy(secret + 16 * i, &lo, 8);
    std::memcpy(secret + 16 * i + 8, &hi, 8);
  }
  uint64_t acc[8] = {kP32_3, kP64_1, kP64_2, kP64_3, kP64_4, kP32_2, kP64_5, kP32_1};
  constexpr size_t kStripes = (sizeof kSecret - 64) / 8, kBlock = 64 * kStripes;
  const size_t blocks = (len - 1) / kBlock;
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t n = 0; n < kStripes; ++n) accumulate512(acc, in + b * kBlock + n * 64, secret + n * 8);
    for (int i = 0; i < 8; ++i) {
      uint64_t a = acc[i];
      a ^= a >> 47;
      a ^= read64(secret + sizeof kSecret - 64 + 8 * i);
      acc[i] = a * kP32_1;
    }
  }
  const size_t stripes = ((len - 1) - kBlock * blocks) / 64;
  for (size_t n = 0; n < stripes; ++n) accumulate512(acc, in + blocks * kBlock + n * 64, secret + n * 8);
  accumulate512(acc, in + len - 64, secret + sizeof kSecret - 64 - 7);
  uint64_t r = len * kP64_1;
  for (int i = 0; i < 4; ++i) {
    r += fold(acc[2 * i] ^ read64(secret + 11 + 16 * i), acc[2 * i + 1] ^ read64(secret + 11 + 16 * i + 8));
  }
  return avalanche(r);
}

uint64_t hash(std::string_view data, uint64_t seed) {
  const auto* in = reinterpret_cast<const uint8_t*>(data.data());
  const size_t len = data.size();
  const uint8_t* s = kSecret;
  if (len <= 16) {
    if (len > 8) {
      const uint64_t lo = read64(in) ^ ((read64(s + 24) ^ read64(s + 32)) + seed);
      const uint64_t hi = read64(in + len - 8) ^ ((read64(s + 40) ^ read64(s + 48)) - seed);
      return avalanche(len + __builtin_bswap64(lo) + hi + fold(lo, hi));
    }
    if (len >= 4) {
      seed ^= static_cast<uint64_t>(__builtin_bswap32(static_cast<uint32_t>(seed))) << 32;
      const uint64_t in64 = read32(in + len - 4) + (static_cast<uint64_t>(read32(in)) << 32);
      return rrmxmx(in64 ^ ((read64(s + 8) ^ read64(s + 16)) - seed), len);
    }
    if (len > 0) {
      const uint32_t c = (static_cast<uint32_t>(in[0]) << 16) | (static_cast<uint32_t>(in[len >> 1]) << 24) |
                         in[len - 1] | (static_cast<uint32_t>(len) << 8);
      return xxh64Avalanche(c ^ (static_cast<uint64_t>(read32(s) ^ read32(s + 4)) + seed));
    }
    return xxh64Avalanche(seed ^ (read64(s + 56) ^ read64(s + 64)));
  }
  if (len <= 128) {
    uint64_t acc = len * kP64_1;
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += mix16(in + 48, s + 96, seed);
          acc += mix16(in + len - 64, s + 112, seed);
        }
        acc += mix16(in + 32, s + 64, seed);
        acc += mix16(in + len - 48, s + 80, seed);
      }
      acc += mix16(in + 16, s + 32, seed);
      acc += mix16(in + len - 32, s + 48, seed);
    }
    acc += mix16(in, s, seed);
    acc += mix16(in + len - 16, s + 16, seed);
    return avalanche(acc);
  }
  if (len <= 240) {
    uint64_t acc = len * kP64_1;
    for (size_t i = 0; i < 8; ++i) acc += mix16(in + 16 * i, s + 16 * i, seed);
    acc = avalanche(acc);
    for (size_t i = 8; i < len / 16; ++i) acc += mix16(in + 16 * i, s + 16 * (i - 8) + 3, seed);
    acc += mix16(in + len - 16, s + 136 - 17, seed);
    return avalanche(acc);
  }
  return hashLong(in, len, seed);
}

}  // namespace xxh3

constexpr uint64_t kFingerprintSeed = 3;  // PG_QUERY_FINGERPRINT_VERSION
// libpg_query stops at 100 levels; far below that the library is asked instead.
constexpr unsigned kMaxDepth = 60;

// The node types whose fingerprint rules were checked against the library (every field in name
// order, nothing else special). Any other type sends the statement to pg_query_fingerprint.
bool plainNode(std::string_view t) {
  static constexpr std::array<std::string_view, 28> kPlain = {
      "SelectStmt", "ResTarget", "ColumnRef", "A_Star", "A_Expr", "BoolExpr", "RangeVar",
      "JoinExpr", "FuncCall", "TypeCast", "TypeName", "SortBy", "CommonTableExpr", "WithClause",
      "SubLink", "RangeSubselect", "NullTest", "CaseExpr", "CaseWhen", "CoalesceExpr", "RowExpr",
      "A_ArrayExpr", "A_Indirection", "MinMaxExpr", "BooleanTest", "RangeFunction",
      "SQLValueFunction", "WindowDef"};
  return std::find(kPlain.begin(), kPlain.end(), t) != kPlain.end();
}

// Fields typed as a concrete struct come unwrapped in the JSON; their type is known by name.
std::string_view unwrappedType(std::string_view parent, std::string_view field) {
  if (field == "relation") return "RangeVar";
  if (parent == "SelectStmt" && (field == "larg" || field == "rarg")) return "SelectStmt";  // JoinExpr's are nodes
  if (field == "withClause") return "WithClause";
  if (field == "typeName") return "TypeName";
  if (field == "over") return "WindowDef";
  return {};
}

class Fingerprinter {
 public:
  Fingerprinter() { buf_.reserve(1024); }
  struct Item {
    uint64_t hash;
    size_t begin;
    size_t length;
  };

  bool ok() const { return ok_; }
  const std::string& tokens() const { return buf_; }

  void rawStmt(object raw) {
    put("RawStmt");
    element st;
    if (!get(raw, "stmt", st)) return;
    if (asNode(st).type != "SelectStmt") {
      ok_ = false;
      return;
    }
    field("stmt", st, "RawStmt", 1);
  }

 private:
  void put(std::string_view s) { buf_.append(s); }

  static bool sortedList(std::string_view f) {
    return f == "fromClause" || f == "targetList" || f == "cols" || f == "rexpr" || f == "valuesLists" ||
           f == "args";
  }

  // A list: its items in order, or for some fields each item hashed alone, the hashes sorted and
  // duplicates dropped (so `IN (1, 2)` and `IN (2, 1, 1)` agree), as libpg_query does.
  void list(array a, std::string_view field_name, unsigned depth) {
    if (!sortedList(field_name)) {
      for (element e : a) node(e, field_name, depth + 1);
      return;
    }
    // Each item is fingerprinted at the end of the buffer (nested sorted lists do the same
    // further on), then the items are put back in hash order: no buffer per item.
    const size_t mark = buf_.size();
    std::vector<Item>& items = scratchItems(depth);
    items.clear();
    for (element e : a) {
      const size_t begin = buf_.size();
      node(e, field_name, depth + 1);
      if (!ok_) return;
      items.push_back(Item{0, begin, buf_.size() - begin});
    }
    if (items.size() < 2) return;  // one item is already in place
    for (Item& it : items) it.hash = xxh3::hash(std::string_view(buf_).substr(it.begin, it.length), kFingerprintSeed);
    std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) { return x.hash < y.hash; });
    std::string& sorted = scratchText(depth);
    sorted.clear();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0 && items[i - 1].hash == items[i].hash) continue;
      sorted.append(buf_, items[i].begin, items[i].length);
    }
    buf_.resize(mark);
    buf_.append(sorted);
  }

  // Per nesting depth, reused across statements on this thread (the walk is recursive, so a
  // list inside a list item needs its own).
  static std::vector<Item>& scratchItems(unsigned depth);
  static std::string& scratchText(unsigned depth);

  void node(element e, std::string_view field_name, unsigned depth) {
    if (depth >= kMaxDepth) {
      ok_ = false;
      return;
    }
    array a;
    if (e.get_array().get(a) == simdjson::SUCCESS) {
      list(a, field_name, depth);
      return;
    }
    object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) {
      ok_ = false;
      return;
    }
    if (o.begin() == o.end()) return;  // a NULL list item
    const Node n = asNode(e);
    if (!n) {
      ok_ = false;
      return;
    }
    const std::string_view type = n.type;
    if (type == "List") {
      array items;
      if (getArray(n.body, "items", items)) list(items, field_name, depth);
      return;
    }
    // Constants and parameters are what a fingerprint abstracts away, with casts of them.
    if (type == "A_Const" || type == "ParamRef") return;
    if (type == "TypeCast") {
      element arg;
      if (get(n.body, "arg", arg)) {
        const std::string_view at = asNode(arg).type;
        if (at == "A_Const" || at == "ParamRef") return;
        if (at == "TypeCast") {
          ok_ = false;
          return;
        }
      }
    }
    // Value nodes keep the field names of libpg_query 14 ("str"), as the library does.
    if (type == "String") {
      put("String");
      put("str");
      put(str(n.body, "sval"));
      return;
    }
    if (type == "Integer") {
      const int64_t v = int64(n.body, "ival", 0);
      if (v != 0) {
        put("Integer");
        put("ival");
        putInt(v);
      }
      return;
    }
    if (type == "Float" || type == "BitString") {
      const std::string_view v = str(n.body, type == "Float" ? "fval" : "bsval");
      if (!v.empty()) {
        put(type);
        put("str");
        put(v);
      }
      return;
    }
    if (type == "Boolean") {
      put("Boolean");
      put("boolval");
      put(boolean(n.body, "boolval") ? "true" : "false");
      return;
    }
    if (!plainNode(type)) {
      ok_ = false;
      return;
    }
    put(type);
    fields(n.body, type, depth);
  }

  void putInt(int64_t v) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, v);
    put(std::string_view(digits, static_cast<size_t>(r.ptr - digits)));
  }

  // A relation name without its runs of two or more digits (partitions by date share a shape).
  void putRelname(std::string_view name) {
    size_t i = 0;
    while (i < name.size()) {
      size_t j = i;
      while (j < name.size() && name[j] >= '0' && name[j] <= '9') ++j;
      if (j - i >= 2) {
        i = j;
      } else if (j > i) {
        buf_.append(name.substr(i, j - i));
        i = j;
      } else {
        buf_.push_back(name[i++]);
      }
    }
  }

  // A node-valued field: its name, then the node; the name is taken back when the node adds
  // nothing, except for a list of one NULL (DISTINCT's marker), which the library keeps.
  void field(std::string_view key, element v, std::string_view parent, unsigned depth) {
    const size_t mark = buf_.size();
    put(key);
    const size_t after = buf_.size();
    object body;
    const std::string_view unwrapped = unwrappedType(parent, key);
    if (!unwrapped.empty() && v.get_object().get(body) == simdjson::SUCCESS && !asNode(v)) {
      fields(body, unwrapped, depth + 1);
    } else if (!unwrapped.empty() && v.type() == simdjson::dom::element_type::OBJECT && asNode(v)) {
      ok_ = false;  // expected an unwrapped struct
      return;
    } else {
      node(v, key, depth + 1);
    }
    if (buf_.size() != after) return;
    array a;
    if (v.get_array().get(a) == simdjson::SUCCESS && a.size() == 1) {
      object only;
      if (a.at(0).get_object().get(only) == simdjson::SUCCESS && only.begin() == only.end()) return;
    }
    buf_.resize(mark);
  }

  void fields(object body, std::string_view type, unsigned depth) {
    if (depth >= kMaxDepth) {  // a long chain of unwrapped structs (UNION ... UNION ...)
      ok_ = false;
      return;
    }
    struct Field {
      std::string_view key;
      element value;
    };
    Field sorted[48];
    size_t n = 0;
    for (auto f : body) {
      if (n == std::size(sorted) || f.key.empty()) {
        ok_ = false;
        return;
      }
      if (f.key == "location" || f.key == "alias") continue;  // never fingerprinted
      sorted[n++] = Field{f.key, f.value};
    }
    // Keys are never empty; most differ in their first byte, which spares a memcmp call.
    std::sort(sorted, sorted + n, [](const Field& a, const Field& b) {
      return a.key[0] != b.key[0] ? static_cast<unsigned char>(a.key[0]) < static_cast<unsigned char>(b.key[0])
                                  : a.key < b.key;
    });
    for (size_t i = 0; i < n && ok_; ++i) {
      const std::string_view k = sorted[i].key;
      const element v = sorted[i].value;
      if (type == "ResTarget" && k == "name") continue;
      switch (v.type()) {
        case simdjson::dom::element_type::STRING: {
          std::string_view s;
          if (v.get_string().get(s) != simdjson::SUCCESS) {
            ok_ = false;
            return;
          }
          // `x IN (...)` and `x = ANY(...)` fingerprint as a plain operator.
          if (type == "A_Expr" && k == "kind" && (s == "AEXPR_IN" || s == "AEXPR_OP_ANY")) s = "AEXPR_OP";
          put(k);
          if (type == "RangeVar" && k == "relname") {
            putRelname(s);
          } else {
            put(s);
          }
          break;
        }
        case simdjson::dom::element_type::BOOL: {
          bool b = false;
          if (v.get_bool().get(b) == simdjson::SUCCESS && b) {
            put(k);
            put("true");
          }
          break;
        }
        case simdjson::dom::element_type::INT64: {
          int64_t x = 0;
          if (v.get_int64().get(x) == simdjson::SUCCESS && x != 0) {
            put(k);
            putInt(x);
          }
          break;
        }
        case simdjson::dom::element_type::ARRAY:
        case simdjson::dom::element_type::OBJECT:
          field(k, v, type, depth);
          break;
        case simdjson::dom::element_type::UINT64:
        case simdjson::dom::element_type::DOUBLE:
        case simdjson::dom::element_type::NULL_VALUE:
          ok_ = false;
          return;
      }
    }
  }

  std::string buf_;
  bool ok_ = true;
};

std::vector<Fingerprinter::Item>& Fingerprinter::scratchItems(unsigned depth) {
  thread_local std::vector<std::vector<Item>> lists(kMaxDepth + 1);
  return lists[depth];
}
std::string& Fingerprinter::scratchText(unsigned depth) {
  thread_local std::vector<std::string> texts(kMaxDepth + 1);
  return texts[depth];
}

}  // namespace

bool fingerprintSelects(element root, uint64_t& out) {
  array stmts;
  if (!root.is_object() || root["stmts"].get_array().get(stmts) != simdjson::SUCCESS) return false;
  Fingerprinter f;
  for (element raw : stmts) {
    object o;
    if (raw.get_object().get(o) != simdjson::SUCCESS) return false;
    f.rawStmt(o);
    if (!f.ok()) return false;
  }
  out = xxh3::hash(f.tokens(), kFingerprintSeed);
  return true;
}

}  // namespace pgwarden::analysis::pgjson
