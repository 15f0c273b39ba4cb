"""The statement-only screens (docs/answers.md): valid queries whose clean answer is wrong whatever
the data holds (a NULL comparison, NOT IN over a NULL, integer division of counts, sum/avg of
DISTINCT values, count(*) over a LEFT JOIN's unmatched rows, a timestamp range cut at midnight),
over a small shop schema with NULLs, foreign keys, one-to-many joins and timestamps.

Precision first: each silent failure of the corpus must be flagged with its code and a hint that
is the corrected statement (it runs, and pgwarden does not flag it again); each correct query of
the corpus must get no warning of these codes. The per-class counts are printed for
docs/answers.md."""

import collections

import pytest

import pgwtest
from conftest import DaemonSet

CODES = {"NULL_COMPARISON", "NOT_IN_NULL", "INTEGER_DIVISION", "DISTINCT_MEASURE",
         "OUTER_JOIN_COUNT", "TIMESTAMP_DATE_BOUND"}

SCHEMA = f"""
    DROP TABLE IF EXISTS sq_items, sq_orders, sq_customers;
    CREATE TABLE sq_customers (id int PRIMARY KEY, name text NOT NULL, country text,
                               referrer_id int, deleted_at timestamptz);
    CREATE TABLE sq_orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES sq_customers(id),
                            status text NOT NULL, amount_cents int NOT NULL, total numeric NOT NULL,
                            big_amount bigint NOT NULL, created_at timestamp NOT NULL,
                            shipped_at timestamp, paid_on date);
    CREATE TABLE sq_items (id int PRIMARY KEY, order_id int NOT NULL REFERENCES sq_orders(id),
                           sku text NOT NULL, qty int NOT NULL, price numeric NOT NULL);
    INSERT INTO sq_customers
      SELECT i, 'c' || i, (ARRAY['DE', 'FR', NULL, 'US'])[1 + i % 4],
             CASE WHEN i % 3 = 0 THEN NULL ELSE 1 + i % 50 END,
             CASE WHEN i % 10 = 0 THEN timestamptz '2025-01-01' + i * interval '1 hour' END
      FROM generate_series(1, 400) i;
    INSERT INTO sq_orders
      SELECT i, 1 + (i * 7) % 300, (ARRAY['NEW', 'PAID', 'SHIPPED'])[1 + i % 3], 100 + i % 900,
             (100 + i % 900) / 100.0, 100 + i % 900,
             timestamp '2024-01-01' + i * interval '97 minutes',
             CASE WHEN i % 3 = 2 THEN timestamp '2024-01-02' + i * interval '97 minutes' END,
             date '2024-01-01' + i % 300
      FROM generate_series(1, 3000) i;
    INSERT INTO sq_items
      SELECT i, 1 + i % 3000, 'sku' || (i % 40), 1 + i % 5, (i % 30) + 0.99
      FROM generate_series(1, 9000) i;
    GRANT SELECT ON sq_customers, sq_orders, sq_items TO {pgwtest.READER_ROLE};
    ANALYZE sq_customers, sq_orders, sq_items;
"""

# (class, statement, code it must get)
SILENT = [
    ("null", "SELECT count(*) FROM sq_customers WHERE country = NULL", "NULL_COMPARISON"),
    ("null", "SELECT count(*) FROM sq_customers WHERE deleted_at = null", "NULL_COMPARISON"),
    ("null", "SELECT id FROM sq_customers WHERE referrer_id <> NULL ORDER BY id LIMIT 5", "NULL_COMPARISON"),
    ("null", "SELECT count(*) FROM sq_orders WHERE shipped_at != NULL", "NULL_COMPARISON"),
    ("null", "SELECT count(*) FROM sq_customers c WHERE c.country = NULL OR c.name = 'c1'", "NULL_COMPARISON"),
    ("null", "SELECT country, count(*) FROM sq_customers GROUP BY country HAVING country = NULL",
     "NULL_COMPARISON"),
    ("null", "SELECT count(*) FROM sq_orders WHERE status = 'PAID' AND NOT (shipped_at = NULL)",
     "NULL_COMPARISON"),
    ("not_in", "SELECT count(*) FROM sq_customers WHERE country NOT IN ('DE', NULL)", "NOT_IN_NULL"),
    ("not_in", "SELECT count(*) FROM sq_customers WHERE referrer_id NOT IN (NULL, 3, 4)", "NOT_IN_NULL"),
    ("not_in", "SELECT count(*) FROM sq_orders WHERE status NOT IN ('NEW' , NULL , 'PAID')", "NOT_IN_NULL"),
    ("not_in", "SELECT id FROM sq_customers WHERE id NOT IN (1,NULL) ORDER BY id LIMIT 3", "NOT_IN_NULL"),
    ("ratio", "SELECT count(*) FILTER (WHERE status = 'PAID') / count(*) AS paid_share FROM sq_orders",
     "INTEGER_DIVISION"),
    ("ratio", "SELECT count(shipped_at) / count(*) FROM sq_orders", "INTEGER_DIVISION"),
    ("ratio", "SELECT round(count(paid_on) / count(*), 2) FROM sq_orders", "INTEGER_DIVISION"),
    ("ratio", "SELECT sum(amount_cents) / count(*) AS avg_cents FROM sq_orders", "INTEGER_DIVISION"),
    ("ratio", "SELECT status, sum(o.amount_cents)/count(*) FROM sq_orders o GROUP BY status",
     "INTEGER_DIVISION"),
    ("ratio", "SELECT country, count(deleted_at) / count(*) FROM sq_customers GROUP BY country",
     "INTEGER_DIVISION"),
    ("distinct", "SELECT sum(DISTINCT amount_cents) FROM sq_orders", "DISTINCT_MEASURE"),
    ("distinct", "SELECT avg(distinct total) FROM sq_orders WHERE status = 'PAID'", "DISTINCT_MEASURE"),
    ("distinct", "SELECT status, sum(DISTINCT total) FROM sq_orders GROUP BY status", "DISTINCT_MEASURE"),
    ("distinct", "SELECT sum( DISTINCT price) FROM sq_items", "DISTINCT_MEASURE"),
    ("outer_count", "SELECT c.id, count(*) FROM sq_customers c LEFT JOIN sq_orders o "
                    "ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 LIMIT 5", "OUTER_JOIN_COUNT"),
    ("outer_count", "SELECT c.country, count(*) AS orders FROM sq_customers c LEFT JOIN sq_orders o "
                    "ON c.id = o.customer_id GROUP BY c.country", "OUTER_JOIN_COUNT"),
    ("outer_count", "SELECT sq_customers.name, count(*) FROM sq_customers LEFT JOIN sq_orders "
                    "ON sq_orders.customer_id = sq_customers.id GROUP BY sq_customers.name "
                    "ORDER BY 2 LIMIT 3", "OUTER_JOIN_COUNT"),
    ("timestamp", "SELECT count(*) FROM sq_orders WHERE created_at BETWEEN '2024-01-01' AND '2024-01-31'",
     "TIMESTAMP_DATE_BOUND"),
    ("timestamp", "SELECT count(*) FROM sq_orders WHERE created_at <= '2024-02-15'", "TIMESTAMP_DATE_BOUND"),
    ("timestamp", "SELECT count(*) FROM sq_orders o WHERE o.shipped_at BETWEEN '2024-03-01' AND '2024-03-31' "
                  "AND o.status = 'SHIPPED'", "TIMESTAMP_DATE_BOUND"),
    ("timestamp", "SELECT count(*) FROM sq_customers WHERE deleted_at <= '2025-01-05'", "TIMESTAMP_DATE_BOUND"),
]

# Correct queries of the same shapes: none may be flagged with the codes above.
CORRECT = [
    ("null", "SELECT count(*) FROM sq_customers WHERE country IS NULL"),
    ("null", "SELECT count(*) FROM sq_customers WHERE deleted_at IS NOT NULL"),
    ("null", "SELECT count(*) FROM sq_customers WHERE country IS DISTINCT FROM 'DE'"),
    ("null", "SELECT coalesce(country, 'none'), count(*) FROM sq_customers GROUP BY 1"),
    ("null", "SELECT count(*) FROM sq_customers WHERE country = 'DE'"),
    ("null", "SELECT nullif(country, 'DE') FROM sq_customers ORDER BY id LIMIT 3"),
    ("not_in", "SELECT count(*) FROM sq_customers WHERE country NOT IN ('DE', 'FR')"),
    ("not_in", "SELECT count(*) FROM sq_customers WHERE country IN ('DE', NULL)"),
    ("not_in", "SELECT count(*) FROM sq_customers WHERE id NOT IN (1, 2, 3)"),
    ("not_in", "SELECT count(*) FROM sq_customers WHERE country NOT IN ('DE') OR country IS NULL"),
    ("ratio", "SELECT count(*) FILTER (WHERE status = 'PAID') * 1.0 / count(*) FROM sq_orders"),
    ("ratio", "SELECT count(*) FILTER (WHERE status = 'PAID')::numeric / count(*) FROM sq_orders"),
    ("ratio", "SELECT sum(total) / count(*) FROM sq_orders"),
    ("ratio", "SELECT sum(big_amount) / count(*) FROM sq_orders"),
    ("ratio", "SELECT avg(amount_cents) FROM sq_orders"),
    ("ratio", "SELECT count(*) / 2 FROM sq_orders"),
    ("ratio", "SELECT 100.0 * count(shipped_at) / count(*) FROM sq_orders"),
    ("distinct", "SELECT count(DISTINCT customer_id) FROM sq_orders"),
    ("distinct", "SELECT sum(amount_cents) FROM sq_orders"),
    ("distinct", "SELECT avg(total) FROM sq_orders WHERE status = 'PAID'"),
    ("distinct", "SELECT count(DISTINCT sku), sum(qty) FROM sq_items"),
    ("outer_count", "SELECT c.id, count(o.id) FROM sq_customers c LEFT JOIN sq_orders o "
                    "ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 LIMIT 5"),
    ("outer_count", "SELECT c.id, count(*) FROM sq_customers c JOIN sq_orders o "
                    "ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 LIMIT 5"),
    ("outer_count", "SELECT count(*) FROM sq_customers c LEFT JOIN sq_orders o ON o.customer_id = c.id"),
    ("outer_count", "SELECT o.status, count(*) FROM sq_customers c LEFT JOIN sq_orders o "
                    "ON o.customer_id = c.id GROUP BY o.status"),
    ("timestamp", "SELECT count(*) FROM sq_orders WHERE created_at >= '2024-01-01' "
                  "AND created_at < '2024-02-01'"),
    ("timestamp", "SELECT count(*) FROM sq_orders WHERE paid_on BETWEEN '2024-01-01' AND '2024-01-31'"),
    ("timestamp", "SELECT count(*) FROM sq_orders WHERE created_at <= '2024-02-15 23:59:59'"),
    ("timestamp", "SELECT count(*) FROM sq_orders WHERE created_at::date <= '2024-02-15'"),
    ("timestamp", "SELECT count(*) FROM sq_orders WHERE created_at < '2024-02-16'"),
    ("timestamp", "SELECT count(*) FROM sq_orders WHERE created_at >= '2024-02-15'"),
]


@pytest.fixture(scope="module")
def shop(pgwarden_bin, pg):
    pg.execute(SCHEMA)
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield daemons.start(pg)
    finally:
        daemons.teardown()
        pg.execute("DROP TABLE IF EXISTS sq_items, sq_orders, sq_customers")


def _ask(client, sql):
    """(codes of the warnings, {code: hint}) for one statement over the simple protocol."""
    _, _, notices = client.query(sql)
    codes, hints = [], {}
    for n in notices:
        detail = n.get("D", "")
        for code in CODES:
            if f'"code":"{code}"' in detail:
                codes.append(code)
                hints[code] = n.get("H", "")
    return codes, hints


def test_silent_failures_are_flagged_with_a_runnable_correction(shop, pg):
    counts = collections.Counter()
    with shop.raw() as c:
        c.login("core", shop.passwords["core"])
        for cls, sql, code in SILENT:
            codes, hints = _ask(c, sql)
            assert code in codes, (sql, codes)
            hint = hints[code]
            assert hint and hint != sql, (sql, hint)
            # The correction runs, and is not flagged again with the same code.
            again, _ = _ask(c, hint)
            assert code not in again, (hint, again)
            counts[cls] += 1
    print("flagged per class:", dict(counts))
    assert sum(counts.values()) == len(SILENT)


def test_correct_queries_get_no_warning(shop):
    false = []
    with shop.raw() as c:
        c.login("core", shop.passwords["core"])
        for cls, sql in CORRECT:
            codes, _ = _ask(c, sql)
            if codes:
                false.append((cls, sql, codes))
    print("false warnings:", false)
    assert not false


def test_the_same_warning_over_the_extended_protocol(shop):
    with shop.raw() as c:
        c.login("core", shop.passwords["core"])
        _, _, notices = c.extended("SELECT count(*) FROM sq_customers WHERE country = NULL")
        assert any('"code":"NULL_COMPARISON"' in n.get("D", "") for n in notices), notices
        hint = [n.get("H") for n in notices if '"code":"NULL_COMPARISON"' in n.get("D", "")][0]
        assert hint == "SELECT count(*) FROM sq_customers WHERE country IS NULL"
