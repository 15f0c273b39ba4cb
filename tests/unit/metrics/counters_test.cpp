// Counters::operator+=: every loop's counters add up into the process's figures, and the last
// server login is the later loop's.
#include "metrics/counters.h"

#include <gtest/gtest.h>

using pgwarden::metrics::Counters;
using pgwarden::Outcome;
using pgwarden::metrics::RejectReason;

TEST(Counters, LoopsAddUp) {
  Counters a;
  Counters b;
  a.clients_accepted = 3;
  b.clients_accepted = 4;
  a.clients_current = 1;
  b.clients_current = 2;
  a.reject(RejectReason::kAuthFailure);
  b.reject(RejectReason::kAuthFailure);
  b.reject(RejectReason::kShutdown);
  a.statement(Outcome::kOk);
  b.statement(Outcome::kOk);
  b.statement(Outcome::kDenied);
  a.server_errors_by_class[5] = 2;
  b.server_errors_by_class[5] = 1;
  b.history_dropped = 7;
  b.write_txn_rolled_back[2] = 1;
  Counters sum;
  sum += a;
  sum += b;
  EXPECT_EQ(sum.clients_accepted, 7u);
  EXPECT_EQ(sum.clients_current, 3u);
  EXPECT_EQ(sum.clients_rejected[static_cast<size_t>(RejectReason::kAuthFailure)], 2u);
  EXPECT_EQ(sum.clients_rejected[static_cast<size_t>(RejectReason::kShutdown)], 1u);
  EXPECT_EQ(sum.statementTotal(Outcome::kOk), 2u);
  EXPECT_EQ(sum.statementTotal(Outcome::kDenied), 1u);
  EXPECT_EQ(sum.server_errors_by_class[5], 3u);
  EXPECT_EQ(sum.history_dropped, 7u);
  EXPECT_EQ(sum.write_txn_rolled_back[2], 1u);
}

TEST(Counters, TheLaterLoginDecides) {
  Counters ok_early;
  ok_early.serverLogin(true, 100);
  Counters failed_later;
  failed_later.serverLogin(false, 200);
  Counters none;  // a loop that never tried
  Counters sum;
  sum += ok_early;
  sum += none;
  sum += failed_later;
  EXPECT_EQ(sum.last_server_login, 0);
  Counters other_order;
  other_order += failed_later;
  other_order += ok_early;
  EXPECT_EQ(other_order.last_server_login, 0);
  Counters only_none;
  only_none += none;
  EXPECT_EQ(only_none.last_server_login, -1);
}
