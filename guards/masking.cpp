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

MaskSet::MaskSet(const std::vector<MaskPattern>& patterns, const TableStatsSnapshot* stats) {
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

std::shared_ptr<Masking> Masking::parse(const YAML::Node& group, const std::string& path) {
  const std::vector<std::string> listed = config::getStringList(group, path, "masked_columns");
  const std::string as = config::getString(group, path, "masked_as", "token");
  if (as != "token" && as != "null") {
    config::fail(group["masked_as"], path + ".masked_as",
                 "expected token or null, got '" + as + "'");
  }
  if (config::getBool(group, path, "schema_only", false)) {
    return std::make_shared<Masking>(std::vector<MaskPattern>{{"*", "*", "*"}}, true, true);
  }
  if (listed.empty()) return nullptr;
  std::vector<MaskPattern> patterns;
  for (size_t i = 0; i < listed.size(); ++i) {
    const std::string& p = listed[i];
    const size_t a = p.find('.');
    const size_t b = a == std::string::npos ? a : p.find('.', a + 1);
    if (b == std::string::npos || p.find('.', b + 1) != std::string::npos || a == 0 || b == a + 1 ||
        b + 1 == p.size()) {
      config::fail(
          group["masked_columns"][i], path + ".masked_columns[" + std::to_string(i) + "]",
          "expected schema.table.column (each part a name or a pattern with *), got '" + p + "'");
    }
    patterns.push_back({p.substr(0, a), p.substr(a + 1, b - a - 1), p.substr(b + 1)});
  }
  return std::make_shared<Masking>(std::move(patterns), as == "null");
}

std::shared_ptr<const MaskSet> Masking::resolve(const TableStatsSnapshot* stats) const {
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

std::shared_ptr<const TableStatsSnapshot> Masking::visibleStats(
    const TableStatsSnapshot* stats) const {
  return stats ? resolve(stats)->visible : nullptr;
}

RowMask Masking::rowMask(std::string_view row_description, const TableStatsSnapshot* stats) const {
  RowMask mask;
  auto fields = protocol::parseRowDescriptionFields(row_description);
  if (!fields) return mask;
  const auto set = resolve(stats);
  mask.masked.resize(fields->size());
  for (size_t i = 0; i < fields->size(); ++i) {
    mask.masked[i] = set->masked((*fields)[i].table_oid, (*fields)[i].column);
    mask.any = mask.any || mask.masked[i];
  }
  return mask;
}

std::vector<std::string> Masking::maskedNames(std::string_view schema, std::string_view table,
                                              const TableStatsSnapshot* stats) const {
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
      const std::string token = maskToken(masking.key(), value);
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
