// CRC-32C (Castagnoli), the checksum of the spool's record entries: the CPU's crc32 instruction
// where it has one (SSE 4.2, chosen once at start), a table otherwise; both give the same value.
// Chained like zlib's crc32: crc32c(crc32c(0, a), b) is the CRC of a then b.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pgwarden::history {

uint32_t crc32c(uint32_t crc, const void* data, size_t n);

// The table's answer, whatever the CPU has (tests compare the two).
uint32_t crc32cPortable(uint32_t crc, const void* data, size_t n);

}  // namespace pgwarden::history
