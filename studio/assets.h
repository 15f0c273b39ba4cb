// The studio's style sheet and script, written for it and compiled into the binary (no CDN, no
// build step). The script only polls /studio/api/live and writes numbers with textContent.
#pragma once

#include <string_view>

namespace pgwarden::studio {

extern const std::string_view kStudioCss;
extern const std::string_view kStudioJs;
extern const std::string_view kStudioIcon;  // SVG

}  // namespace pgwarden::studio
