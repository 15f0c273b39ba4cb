// A history Record as bytes in the spool: fixed-width numbers, then length-prefixed strings, in
// host byte order (the spool is read back only by pgwarden on the same machine). Encoding writes
// straight into the mapped spool; decoding checks every length against the body it was given.
#pragma once

#include <cstddef>
#include <cstdint>

#include "history/record.h"

namespace pgwarden::history {

// Bytes encodeRecord writes for `r`.
size_t encodedSize(const RecordView& r);
size_t encodedSize(const Record& r);

// Writes exactly encodedSize(r) bytes to `out`. A record and its view encode the same bytes.
void encodeRecord(const RecordView& r, uint8_t* out);
void encodeRecord(const Record& r, uint8_t* out);

// Reads a body written by encodeRecord. False when the bytes are not one well-formed record (a
// length past the end, an unknown outcome, bytes left over); `out` is then unspecified.
// Overwrites every field of `out` the spool carries and clears the others but the spool id
// (spool_epoch, spool_seq: the caller's), reusing the storage of its strings.
[[nodiscard]] bool decodeRecord(const uint8_t* body, size_t size, Record* out);

}  // namespace pgwarden::history
