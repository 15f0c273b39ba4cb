// Unit tests of the guarded-writes state machine (session/write_txn.h).
#include <gtest/gtest.h>
