// ASCII case folding for SQL keywords, identifiers, setting names and HTTP header names: one
// definition for every module (locale-independent, unlike std::tolower).
#pragma once

#include <string>
#include <string_view>

namespace pgwarden {

inline char lowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lowerAscii(a[i]) != lowerAscii(b[i])) return false;
  }
  return true;
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = lowerAscii(c);
  return out;
}

}  // namespace pgwarden
