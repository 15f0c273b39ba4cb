// The JSON Schema subset (draft 2020-12) an operator writes for a tool's arguments: compiled once
// at config load, where every keyword outside the subset is an error naming where it sits, and
// then run per call, where every violation names the argument, the rule and what would pass.
// Pure: no I/O, no exceptions out of validate().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "mcp/jsonrpc.h"

namespace pgwarden::mcp {

struct SchemaViolation {
  std::string path;     // JSON pointer into the arguments: "/from", "" for the object itself
  std::string keyword;  // the rule broken: "type", "required", "enum", "format", ...
  std::string message;  // for the model: "from must be a date (YYYY-MM-DD); got \"July\""
  Json expected;        // what would pass, when it is short: enum values, a bound, a type
};

class JsonSchema {
 public:
  // Keywords: type (one or a list), required, properties, additionalProperties (false only at
  // objects; true or absent means no check), enum, const, minimum, maximum, exclusiveMinimum,
  // exclusiveMaximum, multipleOf, minLength, maxLength, pattern (ECMA-262), format (date,
  // date-time, time, uuid, email), items, minItems, maxItems, uniqueItems, default, and the
  // annotations title, description, examples, $schema, $comment. The error names the JSON pointer
  // of the offending keyword: "/properties/from/format: unsupported format \"ipv4\"".
  static Result<JsonSchema> compile(const Json& schema);

  // Every violation, in document order, at most `limit` of them. Empty: valid.
  std::vector<SchemaViolation> validate(const Json& instance, size_t limit = 16) const;
  // `instance` with the `default` of each absent property filled in (recursively for objects).
  Json withDefaults(const Json& instance) const;
  // The schema as written (tools/list's inputSchema).
  const Json& source() const;
  // The top-level properties, in the order Json keeps them (nlohmann::json sorts keys, so the
  // order written is already gone by the time a schema gets here); and the type each declares ("string",
  // "integer", ...; "" when it declares none or several).
  std::vector<std::string> propertyNames() const;
  std::string propertyType(const std::string& name) const;

 private:
  struct Node;
  std::shared_ptr<const Node> root_;
  std::shared_ptr<const Json> source_;
};

}  // namespace pgwarden::mcp
