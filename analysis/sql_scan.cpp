// Passing over string constants, comments and dollar-quoted bodies (see sql_scan.h).
#include "analysis/sql_scan.h"

#include <cctype>

namespace pgwarden::analysis {

size_t skipConstantOrComment(std::string_view sql, size_t i) {
  if (i >= sql.size()) return i;
  const char c = sql[i];
  if (c == '\'') {  // '...' ('' inside); an E'' string's backslash escapes too
    const bool e = i > 0 && (sql[i - 1] | 0x20) == 'e';
    for (++i; i < sql.size(); ++i) {
      if (e && sql[i] == '\\') {
        ++i;
      } else if (sql[i] == '\'') {
        if (i + 1 < sql.size() && sql[i + 1] == '\'') {
          ++i;
        } else {
          break;
        }
      }
    }
    return i + 1;
  }
  if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
    const size_t nl = sql.find('\n', i);
    return nl == std::string_view::npos ? sql.size() : nl + 1;
  }
  if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
    const size_t end = sql.find("*/", i + 2);
    return end == std::string_view::npos ? sql.size() : end + 2;
  }
  if (c == '$') {
    // $tag$...$tag$ (a $n parameter has no closing $)
    size_t k = i + 1;
    while (k < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[k])) || sql[k] == '_'))
      ++k;
    if (k < sql.size() && sql[k] == '$' &&
        (k == i + 1 || !std::isdigit(static_cast<unsigned char>(sql[i + 1])))) {
      const std::string_view tag = sql.substr(i, k - i + 1);
      const size_t end = sql.find(tag, k + 1);
      return end == std::string_view::npos ? sql.size() : end + tag.size();
    }
    return k;
  }
  return i;
}

}  // namespace pgwarden::analysis
