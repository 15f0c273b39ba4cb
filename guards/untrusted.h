// The data-flow rule (docs/untrusted.md): columns a group declares as untrusted content (free
// text that users wrote, which may carry instructions meant for an agent), and what a
// conversation that has read one may no longer do: write, call the group's policy webhooks, or
// call the MCP tools the operator names. The marks of the conversations that have read untrusted
// content are kept process-wide (ConversationMarks), bounded, so that a reload keeps them and
// every door and loop sees the same ones. The statement gate applies the rule (one place for
// both doors).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analysis/analysis.h"
#include "guards/masking.h"

namespace pgwarden::guards {

struct GuardResult;

// A group's `untrusted_content`.
class UntrustedContent {
 public:
  // Reads `untrusted_content: {columns: [schema.table.column, ...], refuse: [writes, webhooks],
  // refuse_tools: [name, ...]}` of a group; nullptr when the group has none.
  static std::shared_ptr<const UntrustedContent> parse(const YAML::Node& group,
                                                       const std::string& path);
  UntrustedContent(std::vector<MaskPattern> columns, bool writes, bool webhooks,
                   std::vector<std::string> tools)
      : columns_(std::move(columns)),
        refuse_writes_(writes),
        refuse_webhooks_(webhooks),
        refuse_tools_(std::move(tools)) {}

  // The first untrusted column ("schema.table.column" as declared, the table as written) that
  // statement `st` of `sql` reads: it names a listed table and either the column (outside
  // constants and comments), a `*` target, or the pattern lists every column. Deliberately
  // generous: a statement that might show untrusted text counts as reading it.
  std::optional<std::string> reads(const analysis::StatementInfo& st, std::string_view sql) const;
  // What of the request a conversation that has read untrusted content may not do: "writes",
  // "webhooks" or "tool <name>"; nullopt when the request is none of those. `webhook`: the chain
  // would call the group's policy webhook with this text.
  std::optional<std::string> refused(const analysis::Analysis& analysis, bool webhook,
                                     std::string_view tool) const;

  const std::vector<MaskPattern>& columns() const { return columns_; }

 private:
  std::vector<MaskPattern> columns_;
  bool refuse_writes_ = true;
  bool refuse_webhooks_ = true;
  std::vector<std::string> refuse_tools_;
};

// The conversations that have read untrusted content: at most kMaxConversations, the one marked
// longest ago forgotten first (counted in forgotten()). Thread-safe: every loop's gate asks it.
class ConversationMarks {
 public:
  static constexpr size_t kMaxConversations = 65536;
  struct Mark {
    std::string what;     // the untrusted column it read first
    int64_t at_unix = 0;  // when (seconds)
  };
  explicit ConversationMarks(size_t max = kMaxConversations) : max_(max) {}
  // The conversation's key: its group, and the pair (user, conversation_id) that a budget is
  // kept for too (docs/agents.md), or its session when it names no conversation.
  static std::string key(std::string_view group, std::string_view user,
                         std::string_view conversation_id, uint64_t session_id);
  std::optional<Mark> find(const std::string& key) const;
  // Marks `key` (a mark already there keeps its first column and time).
  void mark(const std::string& key, std::string what, int64_t at_unix);
  size_t size() const;
  uint64_t forgotten() const;

 private:
  size_t max_;
  mutable std::mutex mutex_;
  std::list<std::string> order_;  // oldest first
  std::unordered_map<std::string, std::pair<Mark, std::list<std::string>::iterator>> marks_;
  uint64_t forgotten_ = 0;
};

// The denial of a statement of a conversation that read untrusted content (UNTRUSTED_FLOW), and
// the warning that comes with the read itself (UNTRUSTED_READ).
GuardResult untrustedFlowDenial(const ConversationMarks::Mark& mark, std::string_view refused);
GuardResult untrustedReadWarning(std::string_view what);

}  // namespace pgwarden::guards
