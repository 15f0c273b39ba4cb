// Masked columns: patterns, their resolution against the catalog snapshot, the token, and the
// rewrite of RowDescription and DataRow (see masking.h).
// https://www.postgresql.org/docs/15/protocol-message-formats.html (RowDescription, DataRow)
#include "guards/masking.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/config_util.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

// The first OID initdb leaves to user objects: tables below it are the system catalogs.
constexpr uint32_t kFirstNormalObjectId = 16384;
constexpr uint32_t kTextOid = 25;
constexpr size_t kResolvedKept = 8;

bool glob(std::string_view pattern, std::string_view text) {
  return util::globMatch(pattern, text, false);  // names are matched as the catalog has them
}

void put16(std::string& out, int16_t v) {
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}
void put32(std::string& out, int32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}
void set32(std::string& out, size_t at, int32_t v) {
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
}
bool get16(std::string_view b, size_t& at, int16_t& v) {
  if (at + 2 > b.size()) return false;
  v = static_cast<int16_t>(static_cast<uint8_t>(b[at]) << 8 | static_cast<uint8_t>(b[at + 1]));
  at += 2;
  return true;
}
bool get32(std::string_view b, size_t& at, int32_t& v) {
  if (at + 4 > b.size()) return false;
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) u = u << 8 | static_cast<uint8_t>(b[at + i]);
  v = static_cast<int32_t>(u);
  at += 4;
  return true;
}

}  // namespace

bool MaskPattern::matches(std::string_view s, std::string_view t, std::string_view c) const {
  return glob(schema, s) && glob(table, t) && glob(column, c);
}
bool MaskPattern::matchesTable(std::string_view s, std::string_view t) const {
  return (s.empty() || glob(schema, s)) && glob(table, t);
}

MaskSet::MaskSet(const std::vector<MaskPattern>& patterns,
                 const analysis::TableStatsSnapshot* stats) {
  if (!stats) return;
  have_stats_ = true;
  generation_ = stats->generation();
  for (const auto& [key, t] : stats->tables()) {
    // A view or a materialized view passes its base tables' values on under its own OID: it
    // stays unknown, so its every column is masked.
    if (t.oid == 0 || (t.kind != 'r' && t.kind != 'p' && t.kind != 'f')) continue;
    known_tables_.insert(t.oid);
    const size_t dot = key.find('.');
    const std::string_view schema(key.data(), dot);
    const std::string_view table(key.data() + dot + 1, key.size() - dot - 1);
    for (size_t i = 0; i < t.attributes.size(); ++i) {
      for (const auto& p : patterns) {
        if (!t.attributes[i].empty() && p.matches(schema, table, t.attributes[i])) {
          columns_.insert({t.oid, static_cast<int16_t>(i + 1)});
          break;
        }
      }
    }
  }
}

bool MaskSet::masked(uint32_t table_oid, int16_t attnum) const {
  if (table_oid == 0) return false;
  if (columns_.count({table_oid, attnum}) != 0) return true;
  return table_oid >= kFirstNormalObjectId && (!have_stats_ || known_tables_.count(table_oid) == 0);
}

std::vector<MaskPattern> parseColumnPatterns(const YAML::Node& node, const std::string& path,
                                             const char* key) {
  const std::vector<std::string> listed = config::getStringList(node, path, key);
  std::vector<MaskPattern> patterns;
  for (size_t i = 0; i < listed.size(); ++i) {
    const std::string& p = listed[i];
    const size_t a = p.find('.');
    const size_t b = a == std::string::npos ? a : p.find('.', a + 1);
    if (b == std::string::npos || p.find('.', b + 1) != std::string::npos || a == 0 || b == a + 1 ||
        b + 1 == p.size()) {
      config::fail(
          node[key][i], path + "." + key + "[" + std::to_string(i) + "]",
          "expected schema.table.column (each part a name or a pattern with *), got '" + p + "'");
    }
    patterns.push_back({p.substr(0, a), p.substr(a + 1, b - a - 1), p.substr(b + 1)});
  }
  return patterns;
}

std::shared_ptr<Masking> Masking::parse(const YAML::Node& group, const std::string& path) {
  const std::string as = config::getString(group, path, "masked_as", "token");
  if (as != "token" && as != "null") {
    config::fail(group["masked_as"], path + ".masked_as",
                 "expected token or null, got '" + as + "'");
  }
  if (config::getBool(group, path, "schema_only", false)) {
    return std::make_shared<Masking>(std::vector<MaskPattern>{{"*", "*", "*"}}, true, true);
  }
  std::vector<MaskPattern> patterns = parseColumnPatterns(group, path, "masked_columns");
  if (patterns.empty()) return nullptr;
  return std::make_shared<Masking>(std::move(patterns), as == "null");
}

std::shared_ptr<const MaskSet> Masking::resolve(const analysis::TableStatsSnapshot* stats) const {
  const uint64_t gen = stats ? stats->generation() : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& s : resolved_) {
    if (s->generation() == gen) return s;
  }
  auto set = std::make_shared<MaskSet>(patterns_, stats);
  if (stats) {
    set->visible = stats->withoutColumns([this](std::string_view key, std::string_view column) {
      const size_t dot = key.find('.');
      for (const auto& p : patterns_) {
        if (p.matches(key.substr(0, dot), key.substr(dot + 1), column)) return true;
      }
      return false;
    });
  }
  if (resolved_.size() >= kResolvedKept) resolved_.erase(resolved_.begin());
  resolved_.push_back(set);
  return set;
}

std::shared_ptr<const analysis::TableStatsSnapshot> Masking::visibleStats(
    const analysis::TableStatsSnapshot* stats) const {
  return stats ? resolve(stats)->visible : nullptr;
}

RowMask Masking::rowMask(std::string_view row_description,
                         const analysis::TableStatsSnapshot* stats) const {
  RowMask mask;
  auto fields = protocol::parseRowDescriptionFields(row_description);
  if (!fields) return mask;
  const auto set = resolve(stats);
  mask.masked.resize(fields->size());
  mask.binary_type.resize(fields->size());
  for (size_t i = 0; i < fields->size(); ++i) {
    mask.masked[i] = set->masked((*fields)[i].table_oid, (*fields)[i].column);
    mask.binary_type[i] = (*fields)[i].format == 1 ? (*fields)[i].type_oid : 0;
    mask.any = mask.any || mask.masked[i];
  }
  return mask;
}

std::vector<std::string> Masking::maskedNames(std::string_view schema, std::string_view table,
                                              const analysis::TableStatsSnapshot* stats) const {
  std::vector<std::string> out;
  auto add = [&out](std::string name) {
    for (const auto& n : out) {
      if (n == name) return;
    }
    out.push_back(std::move(name));
  };
  if (!stats) {
    for (const auto& p : patterns_) {
      if (p.matchesTable(schema, table)) {
        add(p.column.find('*') == std::string::npos ? p.column : "*");
      }
    }
    return out;
  }
  for (const auto& [key, t] : stats->tables()) {
    const size_t dot = key.find('.');
    const std::string_view s(key.data(), dot);
    const std::string_view name(key.data() + dot + 1, key.size() - dot - 1);
    if (name != table || (!schema.empty() && s != schema)) continue;
    for (const auto& column : t.attributes) {
      for (const auto& p : patterns_) {
        if (!column.empty() && p.matches(s, name, column)) add(column);
      }
    }
  }
  return out;
}

bool Masking::constantsMayBeValues(const std::vector<analysis::RelationRef>& relations,
                                   const analysis::TableStatsSnapshot* stats) const {
  if (relations.empty()) return false;
  if (schema_only_ || !stats) return true;
  for (const auto& rel : relations) {
    if (!maskedNames(rel.schema, rel.name, stats).empty()) return true;
    bool known = false;
    for (const auto& [key, t] : stats->tables()) {
      const std::string_view k(key);
      const size_t dot = k.find('.');
      if (k.substr(dot + 1) != rel.name || (!rel.schema.empty() && k.substr(0, dot) != rel.schema))
        continue;
      known = known || t.kind == 'r' || t.kind == 'p' || t.kind == 'f';
    }
    if (!known) return true;
  }
  return false;
}

namespace {

// https://www.postgresql.org/docs/15/datatype.html, the types' send functions (varlena.c,
// int.c, int8.c, numeric.c numeric_send, uuid.c, jsonb.c).
constexpr uint32_t kBoolOid = 16, kCharOid = 18, kNameOid = 19, kInt8Oid = 20, kInt2Oid = 21,
                   kInt4Oid = 23, kOidOid = 26, kJsonOid = 114, kUnknownOid = 705,
                   kBpcharOid = 1042, kVarcharOid = 1043, kNumericOid = 1700, kUuidOid = 2950,
                   kJsonbOid = 3802;

uint64_t bigEndian(std::string_view v) {
  uint64_t u = 0;
  for (char c : v) u = u << 8 | static_cast<uint8_t>(c);
  return u;
}

// numeric_send: ndigits, weight, sign, dscale (int16 each), then ndigits base-10000 digits, the
// first of weight `weight`; printed as numeric_out prints it (get_str_from_var).
std::optional<std::string> numericText(std::string_view v) {
  if (v.size() < 8) return std::nullopt;
  const auto i16 = [&v](size_t at) { return static_cast<int16_t>(bigEndian(v.substr(at, 2))); };
  const int ndigits = i16(0), weight = i16(2), dscale = i16(6);
  const auto sign = static_cast<uint16_t>(i16(4));
  if (ndigits < 0 || dscale < 0 || v.size() != 8 + 2 * static_cast<size_t>(ndigits))
    return std::nullopt;
  if (sign == 0xC000) return "NaN";
  if (sign == 0xD000) return "Infinity";
  if (sign == 0xF000) return "-Infinity";
  if (sign != 0 && sign != 0x4000) return std::nullopt;
  const auto digit = [&](int k) {
    return k >= 0 && k < ndigits ? i16(8 + 2 * static_cast<size_t>(k)) : 0;
  };
  std::string out = sign == 0x4000 ? "-" : "";
  if (weight < 0) {
    out.push_back('0');
  } else {
    for (int w = weight; w >= 0; --w) {
      const std::string d = std::to_string(digit(weight - w));
      out.append(w == weight ? "" : std::string(4 - d.size(), '0')).append(d);
    }
  }
  if (dscale > 0) {
    std::string frac;
    for (int j = 1; static_cast<int>(frac.size()) < dscale; ++j) {
      const std::string d = std::to_string(digit(weight + j));
      frac.append(4 - d.size(), '0').append(d);
    }
    out.push_back('.');
    out.append(frac, 0, static_cast<size_t>(dscale));
  }
  return out;
}

std::string uuidText(std::string_view v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[static_cast<uint8_t>(v[i]) >> 4]);
    out.push_back(kHex[static_cast<uint8_t>(v[i]) & 15]);
  }
  return out;
}

}  // namespace

std::optional<std::string> binaryAsText(uint32_t type_oid, std::string_view value) {
  switch (type_oid) {
    case kNameOid:
    case kTextOid:
    case kBpcharOid:
    case kVarcharOid:
    case kJsonOid:
    case kUnknownOid:
      return std::string(value);  // their binary form is the text itself
    case kJsonbOid:
      if (value.empty() || value[0] != 1) return std::nullopt;  // version 1, then the text
      return std::string(value.substr(1));
    case kCharOid:  // "char": one byte, printed as it is unless it needs an escape
      if (value.size() != 1 || (static_cast<uint8_t>(value[0]) & 0x80) != 0 || value[0] == 0)
        return std::nullopt;
      return std::string(value);
    case kBoolOid:
      if (value.size() != 1) return std::nullopt;
      return std::string(value[0] ? "t" : "f");
    case kInt2Oid:
      if (value.size() != 2) return std::nullopt;
      return std::to_string(static_cast<int16_t>(bigEndian(value)));
    case kInt4Oid:
      if (value.size() != 4) return std::nullopt;
      return std::to_string(static_cast<int32_t>(bigEndian(value)));
    case kOidOid:
      if (value.size() != 4) return std::nullopt;
      return std::to_string(static_cast<uint32_t>(bigEndian(value)));
    case kInt8Oid:
      if (value.size() != 8) return std::nullopt;
      return std::to_string(static_cast<int64_t>(bigEndian(value)));
    case kUuidOid:
      if (value.size() != 16) return std::nullopt;
      return uuidText(value);
    case kNumericOid:
      return numericText(value);
    default:
      return std::nullopt;
  }
}

std::string maskToken(std::string_view key, std::string_view value) {
  static constexpr char kBase32[] = "abcdefghijklmnopqrstuvwxyz234567";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(value.data()), value.size(), mac, &len);
  std::string out = "m_";
  // 80 bits: 16 characters of 5 bits from the first 10 bytes.
  uint64_t acc = 0;
  int bits = 0;
  for (int i = 0; i < 10; ++i) {
    acc = acc << 8 | mac[i];
    bits += 8;
    while (bits >= 5) {
      out.push_back(kBase32[(acc >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  return out;
}

void appendMaskedRowDescription(std::string& out, std::string_view body, const RowMask& mask) {
  auto fields = protocol::parseRowDescriptionFields(body);
  if (!fields) return;
  const size_t start = out.size();
  out.push_back('T');
  put32(out, 0);
  put16(out, static_cast<int16_t>(fields->size()));
  for (size_t i = 0; i < fields->size(); ++i) {
    const auto& f = (*fields)[i];
    const bool m = i < mask.masked.size() && mask.masked[i];
    out.append(f.name.data(), f.name.size());
    out.push_back('\0');
    put32(out, static_cast<int32_t>(f.table_oid));
    put16(out, f.column);
    put32(out, static_cast<int32_t>(m ? kTextOid : f.type_oid));
    put16(out, m ? int16_t{-1} : f.type_len);
    put32(out, m ? -1 : f.type_mod);
    put16(out, f.format);
  }
  set32(out, start + 1, static_cast<int32_t>(out.size() - start - 1));
}

void appendMaskedDataRow(std::string& out, std::string_view body, const RowMask& mask,
                         const Masking& masking) {
  size_t at = 0;
  int16_t n = 0;
  if (!get16(body, at, n) || n < 0) return;
  const size_t start = out.size();
  out.push_back('D');
  put32(out, 0);
  put16(out, n);
  bool bad = false;
  for (int16_t i = 0; i < n; ++i) {
    int32_t len = -1;
    if (!bad &&
        (!get32(body, at, len) || (len >= 0 && at + static_cast<size_t>(len) > body.size()))) {
      bad = true;
    }
    if (bad || len < 0) {
      put32(out, -1);
      continue;
    }
    const std::string_view value = body.substr(at, static_cast<size_t>(len));
    at += static_cast<size_t>(len);
    const bool m = static_cast<size_t>(i) < mask.masked.size() && mask.masked[i];
    if (!m) {
      put32(out, len);
      out.append(value.data(), value.size());
    } else if (masking.asNull()) {
      put32(out, -1);
    } else {
      // A binary value is tokenised over its text form where that is known (binaryAsText), so
      // a binary-format client gets the token a text-format one gets.
      const uint32_t type =
          static_cast<size_t>(i) < mask.binary_type.size() ? mask.binary_type[i] : 0;
      const auto text = type != 0 ? binaryAsText(type, value) : std::nullopt;
      const std::string token = maskToken(masking.key(), text ? std::string_view(*text) : value);
      put32(out, static_cast<int32_t>(token.size()));
      out.append(token);
    }
  }
  set32(out, start + 1, static_cast<int32_t>(out.size() - start - 1));
}

void maskCells(std::vector<std::optional<std::string>>& row, const RowMask& mask,
               const Masking& masking) {
  for (size_t i = 0; i < row.size(); ++i) {
    if (i >= mask.masked.size() || !mask.masked[i] || !row[i]) continue;
    if (masking.asNull()) {
      row[i].reset();
    } else {
      row[i] = maskToken(masking.key(), *row[i]);
    }
  }
}

}  // namespace pgwarden::guards
