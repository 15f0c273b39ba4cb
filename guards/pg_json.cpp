// Constant decoding and structural comparison over libpg_query's JSON parse tree.
#include "guards/pg_json.h"

#include <cstdlib>

namespace pgwarden::guards::pgjson {

namespace {

ConstArg fromAConst(object body) {
  ConstArg c;
  object inner;
  if (getObject(body, "ival", inner)) {
    // {"ival": {}} is zero: libpg_query leaves out default values.
    c.type = ConstArg::Type::kInteger;
    c.number = static_cast<double>(int64(inner, "ival", 0));
    c.text = std::to_string(int64(inner, "ival", 0));
  } else if (getObject(body, "fval", inner)) {
    c.type = ConstArg::Type::kFloat;
    c.text = std::string(str(inner, "fval"));
    c.number = std::strtod(c.text.c_str(), nullptr);
  } else if (getObject(body, "sval", inner)) {
    c.type = ConstArg::Type::kString;
    c.text = std::string(str(inner, "sval"));
  } else if (getObject(body, "boolval", inner)) {
    c.type = ConstArg::Type::kBool;
    c.text = boolean(inner, "boolval") ? "true" : "false";
  } else if (getObject(body, "bsval", inner)) {
    c.type = ConstArg::Type::kString;
    c.text = std::string(str(inner, "bsval"));
  } else if (boolean(body, "isnull")) {
    c.type = ConstArg::Type::kNull;
  }
  return c;
}

}  // namespace

ConstArg constOf(element e) {
  Node n = asNode(e);
  if (n.type == "A_Const") return fromAConst(n.body);
  if (n.type == "TypeCast") {
    element arg;
    if (get(n.body, "arg", arg)) return constOf(arg);
    return {};
  }
  if (n.type == "A_Expr" && str(n.body, "kind") == "AEXPR_OP" && !has(n.body, "lexpr")) {
    // Unary minus/plus on a number: -5, +5.
    array names;
    element rexpr;
    if (!getArray(n.body, "name", names) || !get(n.body, "rexpr", rexpr)) return {};
    std::string_view op;
    for (element name : names) op = stringNode(name);
    ConstArg c = constOf(rexpr);
    if (c.type != ConstArg::Type::kInteger && c.type != ConstArg::Type::kFloat) return {};
    if (op == "-") {
      c.number = -c.number;
      c.text = "-" + c.text;
      return c;
    }
    if (op == "+") return c;
  }
  return {};
}

bool sameTree(element a, element b) {
  const auto ta = a.type();
  if (ta != b.type()) return false;
  switch (ta) {
    case simdjson::dom::element_type::OBJECT: {
      object oa, ob;
      if (a.get_object().get(oa) || b.get_object().get(ob)) return false;
      auto ia = oa.begin(), ib = ob.begin();
      while (true) {
        while (ia != oa.end() && ia.key() == "location") ++ia;
        while (ib != ob.end() && ib.key() == "location") ++ib;
        if (ia == oa.end() || ib == ob.end()) return ia == oa.end() && ib == ob.end();
        if (ia.key() != ib.key() || !sameTree(ia.value(), ib.value())) return false;
        ++ia;
        ++ib;
      }
    }
    case simdjson::dom::element_type::ARRAY: {
      array aa, ab;
      if (a.get_array().get(aa) || b.get_array().get(ab)) return false;
      auto ia = aa.begin(), ib = ab.begin();
      for (; ia != aa.end() && ib != ab.end(); ++ia, ++ib) {
        if (!sameTree(*ia, *ib)) return false;
      }
      return ia == aa.end() && ib == ab.end();
    }
    case simdjson::dom::element_type::STRING: {
      std::string_view sa, sb;
      return !a.get_string().get(sa) && !b.get_string().get(sb) && sa == sb;
    }
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE: {
      double da = 0, db = 0;
      return !a.get_double().get(da) && !b.get_double().get(db) && da == db;
    }
    case simdjson::dom::element_type::BOOL: {
      bool ba = false, bb = false;
      return !a.get_bool().get(ba) && !b.get_bool().get(bb) && ba == bb;
    }
    case simdjson::dom::element_type::NULL_VALUE:
      return true;
  }
  return false;
}

}  // namespace pgwarden::guards::pgjson
