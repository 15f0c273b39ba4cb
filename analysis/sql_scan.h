// The one lexical step two readers of raw SQL text share (the soft-delete screen's look for a
// word, the data-flow rule's look for a column name): passing over what is not code, so that a
// word inside a string constant or a comment is never taken for a name. Pure.
#pragma once

#include <cstddef>
#include <string_view>

namespace pgwarden::analysis {

// Where the string constant ('...', E'...'), comment (-- or /* */) or dollar-quoted body
// ($tag$...$tag$) that starts at `i` ends: the index after it (the end of the text when it is not
// closed). A `$n` parameter is passed over too. `i` itself when none of these starts there.
size_t skipConstantOrComment(std::string_view sql, size_t i);

}  // namespace pgwarden::analysis
