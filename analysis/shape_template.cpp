// Shape templates: built from one analysis and proved on probe texts, applied by substituting a
// text's literals into the literal-dependent fields (analysis/shape_template.h).
#include "analysis/shape_template.h"

#include <atomic>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/shared_spares.h"

namespace pgwarden::analysis {

// A template's rule for one field (named, not file-local: ShapeTemplate holds them).
namespace shape_rules {
enum class RuleKind : uint8_t { kKeep, kSlot, kNegatedSlot, kMapped };

struct Rule {
  RuleKind kind = RuleKind::kKeep;
  uint32_t slot = 0;
};
}  // namespace shape_rules

using shape_rules::Rule;
using shape_rules::RuleKind;

namespace {

// The fields of an analysis that may depend on a literal's value or on byte offsets, visited in
// one fixed order per kind (the template's rules are kept in that order). Every other field is
// taken from the template as is, which the probes check with operator==.
template <typename Visitor>
void forEachField(Analysis& a, Visitor& v) {
  for (StatementInfo& st : a.statements) {
    v.span(st.location, st.length);
    v.span(st.limit_location, st.limit_length);
    v.integer(st.limit_value);
    for (FunctionCall& call : st.calls) {
      for (ConstArg& arg : call.args) {
        v.text(arg.text);
        v.number(arg.number);
      }
    }
    for (ScreenComparison& cmp : st.screen.comparisons) {
      for (ScreenValue& value : cmp.values) v.text(value.text);
      v.span(cmp.location, cmp.length);
    }
    // Relative to the statement's screened text: they map like offsets in the whole text for a
    // text's first statement; for a later one the probes fail and no template is kept.
    for (ScreenIssue& issue : st.screen.issues) v.span(issue.location, issue.length);
  }
}

// The same fields as pointers, for building a template from several samples.
struct FieldRefs {
  std::vector<std::pair<int*, int*>> spans;  // (offset, length)
  std::vector<int64_t*> ints;
  std::vector<std::string*> texts;
  std::vector<double*> numbers;
  void span(int& pos, int& len) { spans.emplace_back(&pos, &len); }
  void integer(int64_t& n) { ints.push_back(&n); }
  void text(std::string& t) { texts.push_back(&t); }
  void number(double& n) { numbers.push_back(&n); }
};

FieldRefs collectFields(Analysis& a) {
  FieldRefs f;
  forEachField(a, f);
  return f;
}

bool sameFieldCounts(const FieldRefs& a, const FieldRefs& b) {
  return a.spans.size() == b.spans.size() && a.ints.size() == b.ints.size() &&
         a.texts.size() == b.texts.size() && a.numbers.size() == b.numbers.size();
}

bool servedKind(StatementKind kind) {
  return kind == StatementKind::kSelect || kind == StatementKind::kInsert ||
         kind == StatementKind::kUpdate || kind == StatementKind::kDelete;
}

bool numericClass(LiteralClass cls) {
  return cls == LiteralClass::kInteger || cls == LiteralClass::kBigInteger ||
         cls == LiteralClass::kFloat;
}

// Offset `p` of the template's text moved to a text with `to`'s literals; -1 when p falls inside
// a literal (nothing the walker reports should point there).
int64_t mapOffset(int64_t p, const std::vector<ShapeLiteral>& from, const std::vector<ShapeLiteral>& to) {
  int64_t delta = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t start = from[i].offset;
    const int64_t end = start + from[i].length;
    if (end <= p) {
      delta += static_cast<int64_t>(to[i].length) - static_cast<int64_t>(from[i].length);
    } else if (start < p) {
      return -1;
    } else {
      break;
    }
  }
  return p + delta;
}

bool mapSpan(int pos, int len, const std::vector<ShapeLiteral>& from,
             const std::vector<ShapeLiteral>& to, int& new_pos, int& new_len) {
  if (pos < 0) {  // "none" (-1): stays so; its length is not an offset
    new_pos = pos;
    new_len = len;
    return true;
  }
  const int64_t p = mapOffset(pos, from, to);
  const int64_t e = mapOffset(static_cast<int64_t>(pos) + len, from, to);
  if (p < 0 || e < p) return false;
  new_pos = static_cast<int>(p);
  new_len = static_cast<int>(e - p);
  return true;
}

// A literal's text as a field holds it (negated for kNegatedSlot), written into `out`, whose
// storage is kept.
void assignSlotText(std::string& out, const ShapeLiteral& lit, RuleKind kind) {
  if (kind == RuleKind::kNegatedSlot) {
    out.assign(1, '-');
    out.append(lit.value);
  } else {
    out.assign(lit.value);
  }
}

double slotNumber(const ShapeLiteral& lit, RuleKind kind) {
  return kind == RuleKind::kNegatedSlot ? -lit.number : lit.number;
}

}  // namespace

struct ShapeTemplate {
  uint64_t id = 0;
  Analysis base;
  std::vector<ShapeLiteral> literals;
  std::vector<Rule> spans, ints, texts, numbers;
  // base's spans (offset, length), in forEachField's order: a span is mapped from these, never
  // from what the analysis being refilled holds, which may be another text's.
  std::vector<std::pair<int, int>> span_values;
};

namespace {

// Applies a template's rules to a copy of its base, field by field in forEachField's order.
struct ApplyRules {
  const ShapeTemplate& t;
  const std::vector<ShapeLiteral>& lits;
  size_t spans = 0, ints = 0, texts = 0, numbers = 0;
  bool ok = true;

  void span(int& pos, int& len) {
    if (spans >= t.spans.size() || spans >= t.span_values.size()) {
      ok = false;
      return;
    }
    const auto [base_pos, base_len] = t.span_values[spans];
    if (t.spans[spans++].kind != RuleKind::kMapped) {
      pos = base_pos;
      len = base_len;
    } else if (!mapSpan(base_pos, base_len, t.literals, lits, pos, len)) {
      ok = false;
    }
  }
  void integer(int64_t& n) {
    if (const Rule* r = slotRule(t.ints, ints)) n = static_cast<int64_t>(slotNumber(lits[r->slot], r->kind));
  }
  void text(std::string& s) {
    if (const Rule* r = slotRule(t.texts, texts)) assignSlotText(s, lits[r->slot], r->kind);
  }
  void number(double& n) {
    if (const Rule* r = slotRule(t.numbers, numbers)) n = slotNumber(lits[r->slot], r->kind);
  }
  // The rule for the next field of a kind when it takes a literal's value; null otherwise.
  const Rule* slotRule(const std::vector<Rule>& rules, size_t& index) {
    if (index >= rules.size()) {
      ok = false;
      return nullptr;
    }
    const Rule& r = rules[index++];
    return r.kind == RuleKind::kSlot || r.kind == RuleKind::kNegatedSlot ? &r : nullptr;
  }
};

// The analyses rebuilt on this thread, kept for the next text: a statement's plan lets go of
// its analysis when the statement is done, and the next rebuild refills that storage. One per
// statement a loop may have in flight at once, up to 32 sessions: with only two, 8 pgbench
// clients found none free most of the time (26.8 allocations per transaction against 16.2).
constexpr size_t kSpares = 32;
SharedSpares<Analysis, kSpares>& rebuiltAnalyses() {
  thread_local SharedSpares<Analysis, kSpares> spares;
  return spares;
}

}  // namespace

bool refillFromShapeTemplate(const ShapeTemplate& t, const Shape& shape, bool holds_template,
                             Analysis& out) {
  const std::vector<ShapeLiteral>& lits = shape.literals;
  if (lits.size() != t.literals.size()) return false;
  // Every field a rule sets is set in full below (a span from base's value); every other field
  // of an analysis this template last filled is still base's. So only a new one is copied.
  if (!holds_template) out = t.base;
  ApplyRules rules{t, lits};
  forEachField(out, rules);
  return rules.ok && rules.spans == t.spans.size() && rules.ints == t.ints.size() &&
         rules.texts == t.texts.size() && rules.numbers == t.numbers.size();
}

std::shared_ptr<const Analysis> applyShapeTemplate(const ShapeTemplate& t, const Shape& shape) {
  if (shape.literals.size() != t.literals.size()) return nullptr;
  uint64_t* filled_by = nullptr;  // the template whose refill the spare holds (0: none, or torn)
  std::shared_ptr<Analysis> out = rebuiltAnalyses().take(&filled_by);
  const bool same = *filled_by == t.id;
  *filled_by = 0;
  if (!refillFromShapeTemplate(t, shape, same, *out)) return nullptr;
  *filled_by = t.id;
  return out;
}

namespace {

// One analysed text of the shape: the template's own text or a probe.
struct Sample {
  const std::vector<ShapeLiteral>* literals;
  Analysis analysis;  // a copy: FieldRefs point into it
  FieldRefs fields;
};

// A value rule: the field equals slot s's value (or its negation) in every sample, or is the same
// in all of them. `get` reads the field of sample k, `slot` a literal's value.
template <typename Get, typename SlotValue>
bool deriveRule(const std::vector<Sample>& samples, size_t nslots, Get get, SlotValue& slot, Rule& rule) {
  for (RuleKind kind : {RuleKind::kSlot, RuleKind::kNegatedSlot}) {
    for (size_t s = 0; s < nslots; ++s) {
      bool all = true;
      for (const Sample& k : samples) {
        if (!slot.load((*k.literals)[s], kind) || !(get(k) == slot.value)) {
          all = false;
          break;
        }
      }
      if (all) {
        rule = Rule{kind, static_cast<uint32_t>(s)};
        return true;
      }
    }
  }
  for (const Sample& k : samples) {
    if (!(get(k) == get(samples.front()))) return false;
  }
  rule = Rule{RuleKind::kKeep, 0};
  return true;
}

}  // namespace

std::shared_ptr<const ShapeTemplate> buildShapeTemplate(std::string_view sql, const Shape& shape,
                                                        const Analysis& analysis,
                                                        const FullAnalysis& analyze) {
  // Deriving a rule looks at every literal for every field: bounded, as it runs on the loop.
  static constexpr size_t kMaxLiterals = 256;
  if (!analysis.ok || analysis.statements.empty() || shape.literals.empty() ||
      shape.literals.size() > kMaxLiterals) {
    return nullptr;
  }
  for (const StatementInfo& st : analysis.statements) {
    if (!servedKind(st.kind)) return nullptr;
  }
  std::vector<Shape> probe_shapes(2);
  std::vector<Sample> samples;
  samples.reserve(3);
  samples.push_back(Sample{&shape.literals, analysis, {}});
  for (int round = 0; round < 2; ++round) {
    std::string probe;
    Shape& ps = probe_shapes[static_cast<size_t>(round)];
    if (!shapeProbeText(sql, shape, round, probe) || !lexShape(probe, ps) || ps.key != shape.key) {
      return nullptr;
    }
    auto full = analyze(probe);
    if (!full || !full->ok) return nullptr;
    samples.push_back(Sample{&ps.literals, *full, {}});
  }
  for (Sample& s : samples) s.fields = collectFields(s.analysis);
  for (const Sample& s : samples) {
    if (!sameFieldCounts(s.fields, samples.front().fields)) return nullptr;
  }

  static std::atomic<uint64_t> last_id{0};
  auto t = std::make_shared<ShapeTemplate>();
  t->id = last_id.fetch_add(1, std::memory_order_relaxed) + 1;
  t->base = analysis;
  t->literals = shape.literals;
  const FieldRefs& f0 = samples.front().fields;
  const size_t nslots = shape.literals.size();
  for (size_t i = 0; i < f0.spans.size(); ++i) {
    for (const Sample& k : samples) {
      int p = 0, l = 0;
      const auto [pos, len] = f0.spans[i];
      if (!mapSpan(*pos, *len, shape.literals, *k.literals, p, l) || p != *k.fields.spans[i].first ||
          l != *k.fields.spans[i].second) {
        return nullptr;
      }
    }
    t->spans.push_back(Rule{RuleKind::kMapped, 0});
    t->span_values.emplace_back(*f0.spans[i].first, *f0.spans[i].second);
  }
  struct TextSlot {
    std::string value;
    bool load(const ShapeLiteral& lit, RuleKind kind) {
      assignSlotText(value, lit, kind);
      return kind == RuleKind::kSlot || numericClass(lit.cls);
    }
  };
  struct NumberSlot {
    double value = 0;
    bool load(const ShapeLiteral& lit, RuleKind kind) {
      value = slotNumber(lit, kind);
      return numericClass(lit.cls);
    }
  };
  struct IntSlot {
    int64_t value = 0;
    bool load(const ShapeLiteral& lit, RuleKind kind) {
      value = static_cast<int64_t>(slotNumber(lit, kind));
      return lit.cls == LiteralClass::kInteger;
    }
  };
  for (size_t i = 0; i < f0.texts.size(); ++i) {
    Rule r;
    TextSlot slot;
    if (!deriveRule(samples, nslots, [i](const Sample& k) { return *k.fields.texts[i]; },
                    slot, r)) {
      return nullptr;
    }
    t->texts.push_back(r);
  }
  for (size_t i = 0; i < f0.numbers.size(); ++i) {
    Rule r;
    NumberSlot slot;
    if (!deriveRule(samples, nslots, [i](const Sample& k) { return *k.fields.numbers[i]; },
                    slot, r)) {
      return nullptr;
    }
    t->numbers.push_back(r);
  }
  for (size_t i = 0; i < f0.ints.size(); ++i) {
    Rule r;
    IntSlot slot;
    if (!deriveRule(samples, nslots, [i](const Sample& k) { return *k.fields.ints[i]; },
                    slot, r)) {
      return nullptr;
    }
    t->ints.push_back(r);
  }
  // The proof: the template rebuilds every sample exactly, fields it does not touch included.
  std::vector<const Shape*> shapes{&shape, &probe_shapes[0], &probe_shapes[1]};
  for (size_t k = 0; k < samples.size(); ++k) {
    auto rebuilt = applyShapeTemplate(*t, *shapes[k]);
    if (!rebuilt || !(*rebuilt == samples[k].analysis)) return nullptr;
  }
  return t;
}

namespace {

// A fresh value for a literal group: same class, same value category, unused so far (by the
// text's own literals or by an earlier group of this probe). Upper case and a quote in strings
// catch fields that fold case or mishandle escapes.
std::string probeValue(const ShapeLiteral& lit, int round, int attempt) {
  const int n = round * 1000 + attempt;
  switch (lit.cls) {
    case LiteralClass::kInteger:
      if (lit.category == ValueCategory::kZero) return "0";
      if (lit.category == ValueCategory::kSmall) return std::to_string(1 + (round * 50 + attempt) % 99);
      return std::to_string(100000 + n * 37);
    case LiteralClass::kBigInteger:
      return std::to_string(3000000000LL + n * 37LL);
    case LiteralClass::kFloat:
      if (lit.category == ValueCategory::kZero) return "0." + std::string(static_cast<size_t>(n % 40 + 1), '0');
      if (lit.category == ValueCategory::kSmall) {
        return std::to_string(1 + (round * 50 + attempt) % 98) + ".5";
      }
      return std::to_string(5000 + n * 37) + ".25";
    case LiteralClass::kString:
    case LiteralClass::kEString:
    case LiteralClass::kUString:
    case LiteralClass::kDollar:
      switch (lit.category) {
        case ValueCategory::kEmpty: return "";
        case ValueCategory::kDotStar: return ".*";
        case ValueCategory::kPercents: return std::string(static_cast<size_t>(n % 60 + 1), '%');
        case ValueCategory::kWildcard: return "Q'%" + std::to_string(n);
        case ValueCategory::kPlain:
        case ValueCategory::kZero:
        case ValueCategory::kSmall: return "Q'\xc3\xa9" + std::to_string(n);
      }
      return "";
    case LiteralClass::kBitB:
    case LiteralClass::kBitX: {
      std::string bits = lit.cls == LiteralClass::kBitB ? "b" : "x";
      for (int v = n + 1; v > 0; v >>= 1) bits += static_cast<char>('0' + (v & 1));
      return bits;
    }
  }
  return "";
}

bool singleValued(const ShapeLiteral& lit) {
  return lit.category == ValueCategory::kEmpty || lit.category == ValueCategory::kDotStar ||
         (lit.category == ValueCategory::kZero && lit.cls == LiteralClass::kInteger);
}

// The literal as written for `value` (decoded), in the original's syntax.
std::string renderLiteral(std::string_view original, const ShapeLiteral& lit, const std::string& value) {
  auto quote = [](std::string_view v, bool backslashes) {
    std::string out;
    for (char c : v) {
      if (c == '\'') out += '\'';
      if (backslashes && c == '\\') out += '\\';
      out += c;
    }
    return out;
  };
  switch (lit.cls) {
    case LiteralClass::kInteger:
    case LiteralClass::kBigInteger:
    case LiteralClass::kFloat: return value;
    case LiteralClass::kString: return "'" + quote(value, false) + "'";
    case LiteralClass::kEString: return "E'" + quote(value, true) + "'";
    case LiteralClass::kUString: return "U&'" + quote(value, false) + "'";
    case LiteralClass::kDollar: {
      const std::string tag(original.substr(0, original.find('$', 1) + 1));
      return tag + value + tag;
    }
    case LiteralClass::kBitB: return "B'" + value.substr(1) + "'";
    case LiteralClass::kBitX: return "X'" + value.substr(1) + "'";
  }
  return value;
}

}  // namespace

uint64_t shapeTemplateId(const ShapeTemplate& tmpl) { return tmpl.id; }

bool shapeProbeText(std::string_view sql, const Shape& shape, int round, std::string& out) {
  std::unordered_set<std::string> used;
  auto keyOf = [](const ShapeLiteral& lit, const std::string& v) {
    return std::string(literalNodeType(lit.cls)) + '\0' + v;
  };
  for (const ShapeLiteral& lit : shape.literals) used.insert(keyOf(lit, lit.value));
  std::vector<std::string> group_value;
  std::vector<std::string> values;
  values.reserve(shape.literals.size());
  for (const ShapeLiteral& lit : shape.literals) {
    const size_t g = static_cast<size_t>(lit.group);
    if (g < group_value.size()) {
      values.push_back(group_value[g]);
      continue;
    }
    if (g != group_value.size()) return false;
    std::string v = lit.value;
    if (!singleValued(lit)) {
      bool found = false;
      for (int attempt = 0; attempt < 200 && !found; ++attempt) {
        v = probeValue(lit, round, attempt + lit.group * 3);
        found = used.insert(keyOf(lit, v)).second;
      }
      if (!found) return false;
    }
    group_value.push_back(v);
    values.push_back(v);
  }
  out.clear();
  size_t at = 0;
  for (size_t i = 0; i < shape.literals.size(); ++i) {
    const ShapeLiteral& lit = shape.literals[i];
    out.append(sql.substr(at, lit.offset - at));
    out += renderLiteral(sql.substr(lit.offset, lit.length), lit, values[i]);
    at = lit.offset + lit.length;
  }
  out.append(sql.substr(at));
  return true;
}

}  // namespace pgwarden::analysis
