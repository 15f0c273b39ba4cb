// A shape template: the analysis of one text plus, for every field that depends on a literal's
// value or on byte offsets, the rule that recomputes it from another text's literals. Templates
// are only made when probing proves them: two more texts of the same shape with other literal
// values are analysed in full and must come out equal, field for field, to what the template
// builds for them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "analysis/analysis.h"
#include "analysis/shape.h"

namespace pgwarden::analysis {

struct ShapeTemplate;

using FullAnalysis = std::function<std::shared_ptr<const Analysis>(std::string_view)>;

// nullptr when the statement is not of a kind the shape cache serves (SELECT, INSERT, UPDATE,
// DELETE), when the analysis failed, when the text has more than 256 literals, or when some field
// cannot be proved reconstructible.
std::shared_ptr<const ShapeTemplate> buildShapeTemplate(std::string_view sql, const Shape& shape,
                                                        const Analysis& analysis,
                                                        const FullAnalysis& analyze);

// The analysis of a text whose shape is the template's; nullptr when a rule does not apply to
// this text (the caller then analyses it in full).
std::shared_ptr<const Analysis> applyShapeTemplate(const ShapeTemplate& tmpl, const Shape& shape);

// The same analysis written into `out`. `holds_template`: `out` holds what this template's last
// successful refill left there, so only the fields its rules set are written; otherwise `out`
// becomes a copy of the template's base first. False when a rule does not apply (`out` is then
// neither: refill it with holds_template false next time). Exposed for tests.
bool refillFromShapeTemplate(const ShapeTemplate& tmpl, const Shape& shape, bool holds_template,
                             Analysis& out);

// A number no other template of this process has (never 0): what the analyses a template
// rebuilds share, for a cache of decisions per shape (session/statement_policy.cpp).
uint64_t shapeTemplateId(const ShapeTemplate& tmpl);

// The text with every literal group replaced by a different value of the same class and value
// category (`round` picks the set); false when no such text could be made. Exposed for tests.
bool shapeProbeText(std::string_view sql, const Shape& shape, int round, std::string& out);

}  // namespace pgwarden::analysis
