// Small read-only helpers over libpg_query's JSON parse tree held in a simdjson DOM: node
// unwrapping ({"Type": {...}}), typed field access and constant decoding. Internal to guards/.
#pragma once

#include <simdjson.h>

// Debian's libsimdjson is built with SIMDJSON_THREADS_ENABLED, which changes dom::parser's layout;
// a translation unit compiled without it would disagree with the library about that layout and
// corrupt the heap. The define comes with `pkg-config --cflags simdjson` (PkgConfig::SIMDJSON).
#ifndef SIMDJSON_THREADS_ENABLED
#error "build with the cflags of pkg-config simdjson (SIMDJSON_THREADS_ENABLED)"
#endif

#include <cstdint>
#include <string>
#include <string_view>

#include "analysis/analysis.h"

namespace pgwarden::analysis::pgjson {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// A parse-tree node: libpg_query writes every Node* as a one-key object {"TypeName": {fields}}.
// Fields typed as a concrete struct (RangeVar* relation, larg/rarg, intoClause) come unwrapped.
struct Node {
  std::string_view type;  // "" when `e` is not a wrapped node
  object body;
  explicit operator bool() const { return !type.empty(); }
};

inline Node asNode(element e) {
  object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return {};
  for (auto field : o) {
    object body;
    if (field.value.get_object().get(body) != simdjson::SUCCESS) return {};
    return Node{field.key, body};
  }
  return {};
}

inline bool get(object o, std::string_view key, element& out) {
  return o.at_key(key).get(out) == simdjson::SUCCESS;
}
inline bool has(object o, std::string_view key) {
  element e;
  return get(o, key, e);
}
inline bool getObject(object o, std::string_view key, object& out) {
  element e;
  return get(o, key, e) && e.get_object().get(out) == simdjson::SUCCESS;
}
inline bool getArray(object o, std::string_view key, array& out) {
  element e;
  return get(o, key, e) && e.get_array().get(out) == simdjson::SUCCESS;
}
inline std::string_view str(object o, std::string_view key) {
  element e;
  std::string_view s;
  if (!get(o, key, e) || e.get_string().get(s) != simdjson::SUCCESS) return {};
  return s;
}
inline int64_t int64(object o, std::string_view key, int64_t fallback = 0) {
  element e;
  int64_t v = 0;
  if (!get(o, key, e) || e.get_int64().get(v) != simdjson::SUCCESS) return fallback;
  return v;
}
inline bool boolean(object o, std::string_view key) {
  element e;
  bool v = false;
  if (!get(o, key, e) || e.get_bool().get(v) != simdjson::SUCCESS) return false;
  return v;
}
// The sval of a {"String": {"sval": "..."}} node ("" for an empty or non-String node).
inline std::string_view stringNode(element e) {
  Node n = asNode(e);
  if (n.type != "String") return {};
  return str(n.body, "sval");
}

// Decodes an A_Const body (and a TypeCast of one, and unary minus on a number) into a ConstArg.
ConstArg constOf(element e);

// True when two subtrees are the same expression, ignoring "location" fields.
bool sameTree(element a, element b);

// libpg_query's fingerprint (pg_query_fingerprint, version 3 as in libpg_query 15-4) computed
// from the JSON tree already parsed, so a cache miss parses the text once instead of twice. It
// reproduces the library's token stream (fields in name order, locations and constants left out,
// some lists sorted by hash) and hashes it with XXH3. Only SELECT statements built from the node
// types it knows are handled; for anything else it returns false and the caller asks libpg_query.
bool fingerprintSelects(element root, uint64_t& out);

}  // namespace pgwarden::analysis::pgjson
