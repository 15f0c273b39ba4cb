// The shape of a SQL text: the text with every literal constant replaced by a marker of its
// class, value category and equality group, found by a cheap lexer pass. Two texts of one shape
// parse to the same tree up to the constants' values, which is what lets the analyzer's second
// cache level reuse one analysis for pgbench-style traffic (same statement, a new literal each
// time). Anything the lexer is not sure about makes the text "not shape-cacheable".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::analysis {

// The literal's lexical class: it decides the parse node (Integer, Float, String, BitString), so
// it is part of the shape.
enum class LiteralClass : char {
  kInteger = 'i',     // decimal digits that fit in int32 (an Integer node)
  kBigInteger = 'I',  // decimal digits beyond int32 (the parser makes a Float node of them)
  kFloat = 'f',       // 1.5, .5, 1., 1e10, 1.5E-3
  kString = 's',      // '...' with '' escapes
  kEString = 'e',     // E'...' with backslash escapes
  kUString = 'u',     // U&'...' (no escapes, no UESCAPE)
  kDollar = 'd',      // $$...$$, $tag$...$tag$
  kBitB = 'b',        // B'0101'
  kBitX = 'x',        // X'1F'
};

// The value category: the walker decides a few things from a constant's value (0 vs a positive
// LIMIT, TABLESAMPLE below 100, LIKE '%', a regex '' or '.*', a screen value with wildcards), so
// texts whose constants fall in different categories have different shapes.
enum class ValueCategory : char {
  kPlain = 'p',       // numbers >= 100; strings with no wildcard character
  kZero = '0',        // numbers equal to zero
  kSmall = 's',       // numbers in (0, 100)
  kEmpty = 'e',       // ''
  kPercents = '%',    // only '%' characters
  kDotStar = '*',     // exactly '.*'
  kWildcard = 'w',    // some '%', '_' or backslash
};

struct ShapeLiteral {
  LiteralClass cls = LiteralClass::kInteger;
  ValueCategory category = ValueCategory::kPlain;
  uint32_t offset = 0;     // bytes into the text
  uint32_t length = 0;     // bytes of the literal as written (prefix and quotes included)
  std::string value;       // as the parser decodes it (what ConstArg::text holds)
  double number = 0;       // numeric classes: the value
  int group = 0;           // literals with one parse value (same node type) share a group
  // Literals of the same group always hold the same value in texts of one shape, so the
  // analysis's `x = x` tests on constants cannot change between them.
};

struct Shape {
  std::string key;                     // the text with each literal replaced by a marker
  std::vector<ShapeLiteral> literals;  // in text order
};

// Fills `out` and returns true when the text is shape-cacheable. False: an unterminated string or
// comment, a character outside plain SQL, a backslash in a plain string, U&'' with escapes or
// UESCAPE, N'' strings, string continuation across lines, psql variables, numbers with trailing
// junk or leading zeros, hex/octal/binary or underscored numbers, ... (analysed the exact way).
bool lexShape(std::string_view sql, Shape& out);

// The parse node a literal of this class becomes ("Integer", "Float", "String", "BitString").
std::string_view literalNodeType(LiteralClass cls);

}  // namespace pgwarden::analysis
