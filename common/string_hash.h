// Hashing and comparing strings by their string_view, for unordered maps keyed by std::string
// that are looked up with a view (heterogeneous lookup): no key is built to find an entry.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace pgwarden {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct StringViewEqual {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

}  // namespace pgwarden
