"""The corpus of docs/answers.md: valid queries whose clean answer is wrong (SILENT, each tagged with
its class and the code that must flag it) and correct queries of the same shapes (CORRECT, which no
result screen may flag), over a multi-tenant shop schema with NULLs, soft deletes, foreign keys,
one-to-many joins and timestamps (some relative to the day the schema is made).

`flagged` says the case is flagged today: test_answers_corpus.py fails when such a case is missed
(a regression) or when a correct query gets any warning; a case not yet flagged is reported as
missed. Shared with test_answers_statement.py, which checks the statement-only hints run."""

import collections
from dataclasses import dataclass

import pgwtest
from conftest import DaemonSet

# Every code a result screen sends (guards/codes.h kResultScreens).
SCREEN_CODES = {"UNKNOWN_VALUE", "OUT_OF_RANGE", "UNFILTERED", "ARBITRARY_ROWS", "PARTIAL_RESULT",
                "FANOUT_JOIN", "NULL_COMPARISON", "NOT_IN_NULL", "INTEGER_DIVISION",
                "DISTINCT_MEASURE", "OUTER_JOIN_COUNT", "TIMESTAMP_DATE_BOUND", "LEFT_JOIN_FILTERED",
                "FOREIGN_KEY_MISMATCH", "SOFT_DELETED_ROWS", "CONDITIONS_EXCLUDE", "ASSERTION_FAILED"}

TABLES = "sq_payments, sq_items, sq_orders, sq_users, sq_products, sq_customers, sq_tenants, sq_coupons"

# What the corpus's group declares (docs/answers.md): result assertions (class 8), a soft-delete
# column no name gives away (retired_at), and the screens' indexed probe (classes 5 and 7: an
# e-mail column has more values than pg_stats keeps). The probe's budget is above the packaged
# example's 50ms so that a loaded test machine does not turn a probe into a timeout (which would
# only make it silent).
DECLARATIONS = {
    "result_assertions": [{"columns": "*_pct", "min": 0, "max": 100},
                          {"columns": "*_rate", "min": 0, "max": 1},
                          {"columns": "amount*", "min": 0}],
    "soft_delete_columns": ["public.sq_coupons.retired_at"],
    "screen_probe_timeout": "500ms",
}

SCHEMA = f"""
    DROP TABLE IF EXISTS {TABLES};
    CREATE TABLE sq_tenants (id int PRIMARY KEY, name text NOT NULL, plan text NOT NULL);
    CREATE TABLE sq_customers (id int PRIMARY KEY, tenant_id int NOT NULL REFERENCES sq_tenants(id),
                               name text NOT NULL, country text, referrer_id int, churned_at timestamptz);
    CREATE TABLE sq_users (id int PRIMARY KEY, tenant_id int NOT NULL REFERENCES sq_tenants(id),
                           email text NOT NULL UNIQUE, created_at timestamptz NOT NULL, deleted_at timestamptz);
    CREATE TABLE sq_products (id int PRIMARY KEY, tenant_id int NOT NULL REFERENCES sq_tenants(id),
                              sku text NOT NULL, price numeric NOT NULL, is_deleted boolean NOT NULL);
    CREATE TABLE sq_orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES sq_customers(id),
                            status text NOT NULL, amount_cents int NOT NULL, total numeric NOT NULL,
                            big_amount bigint NOT NULL, created_at timestamp NOT NULL,
                            shipped_at timestamp, paid_on date, discount_pct numeric NOT NULL);
    CREATE TABLE sq_items (id int PRIMARY KEY, order_id int NOT NULL REFERENCES sq_orders(id),
                           sku text NOT NULL, qty int NOT NULL, price numeric NOT NULL);
    CREATE TABLE sq_payments (id int PRIMARY KEY, order_id int REFERENCES sq_orders(id),
                              amount numeric NOT NULL, paid_at timestamptz NOT NULL);
    CREATE TABLE sq_coupons (id int PRIMARY KEY, code text NOT NULL, pct int NOT NULL,
                             retired_at timestamptz);
    INSERT INTO sq_tenants SELECT i, 't' || i, (ARRAY['free', 'pro'])[1 + i % 2] FROM generate_series(1, 20) i;
    INSERT INTO sq_customers
      SELECT i, 1 + i % 20, 'c' || i, (ARRAY['DE', 'FR', NULL, 'US'])[1 + i % 4],
             CASE WHEN i % 3 = 0 THEN NULL ELSE 1 + i % 50 END,
             CASE WHEN i % 10 = 0 THEN timestamptz '2025-01-01' + i * interval '1 hour' END
      FROM generate_series(1, 400) i;
    INSERT INTO sq_users
      SELECT i, 1 + i % 20, 'u' || i || '@example.com', now() - i * interval '2 hours',
             CASE WHEN i % 8 = 0 THEN now() - i * interval '1 hour' END
      FROM generate_series(1, 2000) i;
    INSERT INTO sq_products
      SELECT i, 1 + i % 20, 'sku' || i, 5 + i % 50, i % 6 = 0 FROM generate_series(1, 600) i;
    INSERT INTO sq_orders
      SELECT i, 1 + (i * 7) % 300, (ARRAY['NEW', 'PAID', 'SHIPPED'])[1 + i % 3], 100 + i % 900,
             (100 + i % 900) / 100.0, 100 + i % 900,
             timestamp '2024-01-01' + i * interval '97 minutes',
             CASE WHEN i % 3 = 2 THEN timestamp '2024-01-02' + i * interval '97 minutes' END,
             date '2024-01-01' + i % 300, i % 40
      FROM generate_series(1, 3000) i;
    INSERT INTO sq_items
      SELECT i, 1 + i % 3000, 'sku' || (i % 40), 1 + i % 5, (i % 30) + 0.99
      FROM generate_series(1, 9000) i;
    INSERT INTO sq_payments
      SELECT i, CASE WHEN i % 25 = 0 THEN NULL ELSE 1 + (i * 3) % 3000 END, (i % 70) + 0.5,
             now() - i * interval '3 hours'
      FROM generate_series(1, 2500) i;
    INSERT INTO sq_coupons
      SELECT i, 'C' || i, i % 50, CASE WHEN i % 5 = 0 THEN now() - i * interval '1 day' END
      FROM generate_series(1, 200) i;
    GRANT SELECT ON {TABLES} TO {pgwtest.READER_ROLE};
    ANALYZE {TABLES};
"""


@dataclass(frozen=True)
class Case:
    cls: str          # the class of docs/answers.md's corpus table
    sql: str
    code: str = ""    # the code that must flag it ("" for a correct query)
    flagged: bool = True  # flagged today: missing it is a regression


S = Case
# Classes, in the order: 1 null semantics, 2 arithmetic, 3 grain, 4 time, 5 values,
# 6 soft deletes, 7 empty results explained, 8 operator assertions; plus the older shapes.
SILENT = [
    # 1. NULL semantics
    S("null_comparison", "SELECT count(*) FROM sq_customers WHERE country = NULL", "NULL_COMPARISON"),
    S("null_comparison", "SELECT count(*) FROM sq_customers WHERE churned_at = null", "NULL_COMPARISON"),
    S("null_comparison", "SELECT id FROM sq_customers WHERE referrer_id <> NULL ORDER BY id LIMIT 5", "NULL_COMPARISON"),
    S("null_comparison", "SELECT count(*) FROM sq_orders WHERE shipped_at != NULL", "NULL_COMPARISON"),
    S("null_comparison", "SELECT count(*) FROM sq_customers c WHERE c.country = NULL OR c.name = 'c1'",
      "NULL_COMPARISON"),
    S("null_comparison", "SELECT country, count(*) FROM sq_customers GROUP BY country HAVING country = NULL",
      "NULL_COMPARISON"),
    S("null_comparison", "SELECT count(*) FROM sq_orders WHERE status = 'PAID' AND NOT (shipped_at = NULL)",
      "NULL_COMPARISON"),
    S("not_in_null", "SELECT count(*) FROM sq_customers WHERE country NOT IN ('DE', NULL)", "NOT_IN_NULL"),
    S("not_in_null", "SELECT count(*) FROM sq_customers WHERE referrer_id NOT IN (NULL, 3, 4)", "NOT_IN_NULL"),
    S("not_in_null", "SELECT count(*) FROM sq_orders WHERE status NOT IN ('NEW' , NULL , 'PAID')", "NOT_IN_NULL"),
    S("not_in_null", "SELECT id FROM sq_customers WHERE id NOT IN (1,NULL) ORDER BY id LIMIT 3", "NOT_IN_NULL"),
    S("not_in_subquery", "SELECT count(*) FROM sq_customers WHERE id NOT IN (SELECT referrer_id FROM sq_customers)",
      "NOT_IN_NULL"),
    S("not_in_subquery", "SELECT count(*) FROM sq_orders o WHERE o.id NOT IN (SELECT p.order_id FROM sq_payments p)",
      "NOT_IN_NULL"),
    S("not_in_subquery", "SELECT count(*) FROM sq_orders WHERE id NOT IN "
      "(SELECT order_id FROM sq_payments WHERE amount > 10)", "NOT_IN_NULL"),
    S("outer_join_count", "SELECT c.id, count(*) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 LIMIT 5", "OUTER_JOIN_COUNT"),
    S("outer_join_count", "SELECT c.country, count(*) AS orders FROM sq_customers c LEFT JOIN sq_orders o "
      "ON c.id = o.customer_id GROUP BY c.country", "OUTER_JOIN_COUNT"),
    S("outer_join_count", "SELECT sq_customers.name, count(*) FROM sq_customers LEFT JOIN sq_orders "
      "ON sq_orders.customer_id = sq_customers.id GROUP BY sq_customers.name ORDER BY 2 LIMIT 3",
      "OUTER_JOIN_COUNT"),
    S("left_join_filtered", "SELECT c.id, count(o.id) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id WHERE o.status = 'PAID' GROUP BY c.id ORDER BY 2 LIMIT 5",
      "LEFT_JOIN_FILTERED"),
    S("left_join_filtered", "SELECT c.name, o.total FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id WHERE o.created_at >= '2024-03-01'", "LEFT_JOIN_FILTERED"),
    S("left_join_filtered", "SELECT count(c.id) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id WHERE o.amount_cents > 500 AND c.country = 'DE'", "LEFT_JOIN_FILTERED"),
    # 2. Arithmetic
    S("integer_division", "SELECT count(*) FILTER (WHERE status = 'PAID') / count(*) AS paid_share FROM sq_orders",
      "INTEGER_DIVISION"),
    S("integer_division", "SELECT count(shipped_at) / count(*) FROM sq_orders", "INTEGER_DIVISION"),
    S("integer_division", "SELECT round(count(paid_on) / count(*), 2) FROM sq_orders", "INTEGER_DIVISION"),
    S("integer_division", "SELECT sum(amount_cents) / count(*) AS avg_cents FROM sq_orders", "INTEGER_DIVISION"),
    S("integer_division", "SELECT status, sum(o.amount_cents)/count(*) FROM sq_orders o GROUP BY status",
      "INTEGER_DIVISION"),
    S("integer_division", "SELECT country, count(churned_at) / count(*) FROM sq_customers GROUP BY country",
      "INTEGER_DIVISION"),
    # 3. Grain
    S("distinct_measure", "SELECT sum(DISTINCT amount_cents) FROM sq_orders", "DISTINCT_MEASURE"),
    S("distinct_measure", "SELECT avg(distinct total) FROM sq_orders WHERE status = 'PAID'", "DISTINCT_MEASURE"),
    S("distinct_measure", "SELECT status, sum(DISTINCT total) FROM sq_orders GROUP BY status", "DISTINCT_MEASURE"),
    S("distinct_measure", "SELECT sum( DISTINCT price) FROM sq_items", "DISTINCT_MEASURE"),
    S("fanout", "SELECT sum(o.total) FROM sq_orders o JOIN sq_items i ON i.order_id = o.id", "FANOUT_JOIN"),
    S("fanout", "SELECT o.status, sum(o.total) FROM sq_orders o JOIN sq_items i ON i.order_id = o.id "
      "GROUP BY o.status", "FANOUT_JOIN"),
    S("fanout", "SELECT avg(o.total) FROM sq_orders o JOIN sq_items i ON i.order_id = o.id", "FANOUT_JOIN"),
    S("fanout", "SELECT o.status, avg(o.amount_cents) FROM sq_orders o JOIN sq_payments p ON p.order_id = o.id "
      "GROUP BY o.status", "FANOUT_JOIN"),
    S("foreign_key_mismatch", "SELECT count(*) FROM sq_orders o JOIN sq_customers c ON c.id = o.id",
      "FOREIGN_KEY_MISMATCH"),
    S("foreign_key_mismatch", "SELECT i.sku, o.status FROM sq_items i JOIN sq_orders o ON o.id = i.id "
      "WHERE i.qty > 4 ORDER BY i.id LIMIT 5", "FOREIGN_KEY_MISMATCH"),
    S("foreign_key_mismatch", "SELECT c.name FROM sq_customers c JOIN sq_tenants t ON c.id = t.id "
      "WHERE t.plan = 'pro' ORDER BY c.name LIMIT 5", "FOREIGN_KEY_MISMATCH"),
    # 4. Time
    S("timestamp_date_bound", "SELECT count(*) FROM sq_orders WHERE created_at BETWEEN '2024-01-01' AND '2024-01-31'",
      "TIMESTAMP_DATE_BOUND"),
    S("timestamp_date_bound", "SELECT count(*) FROM sq_orders WHERE created_at <= '2024-02-15'",
      "TIMESTAMP_DATE_BOUND"),
    S("timestamp_date_bound", "SELECT count(*) FROM sq_orders o WHERE o.shipped_at BETWEEN '2024-03-01' AND "
      "'2024-03-31' AND o.status = 'SHIPPED'", "TIMESTAMP_DATE_BOUND"),
    S("timestamp_date_bound", "SELECT count(*) FROM sq_customers WHERE churned_at <= '2025-01-05'",
      "TIMESTAMP_DATE_BOUND"),
    S("out_of_range", "SELECT count(*) FROM sq_orders WHERE created_at >= '2025-06-01'", "OUT_OF_RANGE"),
    S("out_of_range", "SELECT count(*) FROM sq_orders WHERE paid_on < '2023-01-01'", "OUT_OF_RANGE"),
    S("relative_range", "SELECT count(*) FROM sq_orders WHERE created_at >= now() - interval '30 days'",
      "OUT_OF_RANGE"),
    S("relative_range", "SELECT count(*) FROM sq_orders WHERE paid_on > current_date - 7", "OUT_OF_RANGE"),
    S("relative_range", "SELECT id FROM sq_orders WHERE created_at > current_timestamp - interval '1 month' "
      "ORDER BY id", "OUT_OF_RANGE"),
    S("null_aggregate", "SELECT sum(total) FROM sq_orders WHERE status = 'CANCELLED'", "UNKNOWN_VALUE"),
    S("null_aggregate", "SELECT max(created_at) FROM sq_orders WHERE created_at > '2025-01-01'", "OUT_OF_RANGE",
      ),
    S("null_aggregate", "SELECT avg(amount_cents) FROM sq_orders WHERE status = 'paid'", "UNKNOWN_VALUE"),
    # 5. Values
    S("unknown_value", "SELECT count(*) FROM sq_orders WHERE status = 'paid'", "UNKNOWN_VALUE"),
    S("unknown_value", "SELECT count(*) FROM sq_orders WHERE status IN ('CANCELLED', 'REFUNDED')", "UNKNOWN_VALUE"),
    S("unknown_value", "SELECT count(*) FROM sq_users WHERE email = 'nobody@example.com' AND deleted_at IS NULL",
      "UNKNOWN_VALUE"),
    S("unknown_value", "SELECT plan FROM sq_tenants WHERE name = 'T7'", "UNKNOWN_VALUE"),
    S("unknown_value", "SELECT count(*) FROM sq_items WHERE sku = 'sku-7'", "UNKNOWN_VALUE"),
    S("unknown_pattern", "SELECT count(*) FROM sq_orders WHERE status LIKE 'ship%'", "UNKNOWN_VALUE"),
    S("unknown_pattern", "SELECT count(*) FROM sq_tenants WHERE name LIKE 'tenant%'", "UNKNOWN_VALUE"),
    S("unknown_pattern", "SELECT sum(qty) FROM sq_items WHERE sku LIKE 'SKU%'", "UNKNOWN_VALUE"),
    # 6. Soft deletes
    S("soft_delete", "SELECT count(*) FROM sq_users WHERE tenant_id = 3", "SOFT_DELETED_ROWS"),
    S("soft_delete", "SELECT sku, price FROM sq_products WHERE tenant_id = 4 ORDER BY sku LIMIT 10",
      "SOFT_DELETED_ROWS"),
    S("soft_delete", "SELECT t.name, count(*) FROM sq_tenants t JOIN sq_users u ON u.tenant_id = t.id "
      "GROUP BY t.name ORDER BY t.name", "SOFT_DELETED_ROWS"),
    # 7. Empty results explained
    S("conditions_exclude", "SELECT count(*) FROM sq_orders WHERE status = 'NEW' AND shipped_at IS NOT NULL",
      "CONDITIONS_EXCLUDE"),
    S("conditions_exclude", "SELECT id FROM sq_orders WHERE shipped_at IS NULL AND status = 'SHIPPED'",
      "CONDITIONS_EXCLUDE"),
    S("conditions_exclude", "SELECT count(*) FROM sq_orders WHERE status IN ('NEW', 'PAID') "
      "AND shipped_at IS NOT NULL", "CONDITIONS_EXCLUDE"),
    # 8. Operator assertions (DECLARATIONS)
    S("assertion", "SELECT id, discount_pct * 100 AS discount_pct FROM sq_orders ORDER BY id LIMIT 5",
      "ASSERTION_FAILED"),
    S("assertion", "SELECT status, count(*) FILTER (WHERE shipped_at IS NOT NULL) * 100.0 / count(*) AS "
      "shipped_rate FROM sq_orders GROUP BY status ORDER BY status", "ASSERTION_FAILED"),
    S("assertion", "SELECT id, amount - 40 AS amount FROM sq_payments ORDER BY id LIMIT 3", "ASSERTION_FAILED"),
    # 6. Soft deletes declared in config (retired_at)
    S("declared_soft_delete", "SELECT count(*) FROM sq_coupons WHERE pct >= 20", "SOFT_DELETED_ROWS"),
    S("declared_soft_delete", "SELECT code FROM sq_coupons ORDER BY pct DESC, id LIMIT 3", "SOFT_DELETED_ROWS"),
    # Older shapes
    S("arbitrary_rows", "SELECT id FROM sq_orders WHERE status = 'PAID' LIMIT 5", "ARBITRARY_ROWS"),
]

C = Case
CORRECT = [
    C("null_comparison", "SELECT count(*) FROM sq_customers WHERE country IS NULL"),
    C("null_comparison", "SELECT count(*) FROM sq_customers WHERE churned_at IS NOT NULL"),
    C("null_comparison", "SELECT count(*) FROM sq_customers WHERE country IS DISTINCT FROM 'DE'"),
    C("null_comparison", "SELECT coalesce(country, 'none'), count(*) FROM sq_customers GROUP BY 1"),
    C("null_comparison", "SELECT count(*) FROM sq_customers WHERE country = 'DE'"),
    C("null_comparison", "SELECT nullif(country, 'DE') FROM sq_customers ORDER BY id LIMIT 3"),
    C("not_in_null", "SELECT count(*) FROM sq_customers WHERE country NOT IN ('DE', 'FR')"),
    C("not_in_null", "SELECT count(*) FROM sq_customers WHERE country IN ('DE', NULL)"),
    C("not_in_null", "SELECT count(*) FROM sq_customers WHERE id NOT IN (1, 2, 3)"),
    C("not_in_null", "SELECT count(*) FROM sq_customers WHERE country NOT IN ('DE') OR country IS NULL"),
    C("not_in_subquery", "SELECT count(*) FROM sq_customers WHERE id NOT IN (SELECT customer_id FROM sq_orders)"),
    C("not_in_subquery", "SELECT count(*) FROM sq_customers WHERE id NOT IN "
      "(SELECT referrer_id FROM sq_customers WHERE referrer_id IS NOT NULL)"),
    C("not_in_subquery", "SELECT count(*) FROM sq_orders o WHERE NOT EXISTS "
      "(SELECT 1 FROM sq_payments p WHERE p.order_id = o.id)"),
    C("not_in_subquery", "SELECT count(*) FROM sq_orders WHERE id IN (SELECT order_id FROM sq_payments)"),
    C("outer_join_count", "SELECT c.id, count(o.id) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 LIMIT 5"),
    C("outer_join_count", "SELECT c.id, count(*) FROM sq_customers c JOIN sq_orders o "
      "ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 LIMIT 5"),
    C("outer_join_count", "SELECT count(*) FROM sq_customers c LEFT JOIN sq_orders o ON o.customer_id = c.id"),
    C("outer_join_count", "SELECT o.status, count(*) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id GROUP BY o.status"),
    C("left_join_filtered", "SELECT c.id, count(o.id) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id AND o.status = 'PAID' GROUP BY c.id ORDER BY 2 LIMIT 5"),
    C("left_join_filtered", "SELECT count(*) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id WHERE o.id IS NULL"),
    C("left_join_filtered", "SELECT c.id, count(o.id) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id WHERE c.country = 'DE' GROUP BY c.id ORDER BY 2 LIMIT 5"),
    C("left_join_filtered", "SELECT count(o.id) FROM sq_customers c LEFT JOIN sq_orders o "
      "ON o.customer_id = c.id WHERE o.status IS DISTINCT FROM 'NEW'"),
    C("integer_division", "SELECT count(*) FILTER (WHERE status = 'PAID') * 1.0 / count(*) FROM sq_orders"),
    C("integer_division", "SELECT count(*) FILTER (WHERE status = 'PAID')::numeric / count(*) FROM sq_orders"),
    C("integer_division", "SELECT sum(total) / count(*) FROM sq_orders"),
    C("integer_division", "SELECT sum(big_amount) / count(*) FROM sq_orders"),
    C("integer_division", "SELECT avg(amount_cents) FROM sq_orders"),
    C("integer_division", "SELECT count(*) / 2 FROM sq_orders"),
    C("integer_division", "SELECT 100.0 * count(shipped_at) / count(*) FROM sq_orders"),
    C("distinct_measure", "SELECT count(DISTINCT customer_id) FROM sq_orders"),
    C("distinct_measure", "SELECT sum(amount_cents) FROM sq_orders"),
    C("distinct_measure", "SELECT avg(total) FROM sq_orders WHERE status = 'PAID'"),
    C("distinct_measure", "SELECT count(DISTINCT sku), sum(qty) FROM sq_items"),
    C("fanout", "SELECT sum(i.price) FROM sq_items i JOIN sq_orders o ON o.id = i.order_id"),
    C("fanout", "SELECT o.status, avg(i.qty) FROM sq_orders o JOIN sq_items i ON i.order_id = o.id "
      "GROUP BY o.status"),
    C("fanout", "SELECT count(*) FROM sq_orders o JOIN sq_customers c ON c.id = o.customer_id "
      "WHERE c.country = 'FR'"),
    C("fanout", "SELECT sum(o.total) FROM sq_orders o WHERE EXISTS "
      "(SELECT 1 FROM sq_items i WHERE i.order_id = o.id)"),
    C("foreign_key_mismatch", "SELECT count(*) FROM sq_orders o JOIN sq_customers c ON c.id = o.customer_id"),
    C("foreign_key_mismatch", "SELECT i.sku, o.status FROM sq_items i JOIN sq_orders o ON o.id = i.order_id "
      "WHERE i.qty > 4 ORDER BY i.id LIMIT 5"),
    C("foreign_key_mismatch", "SELECT c.name, r.name FROM sq_customers c JOIN sq_customers r "
      "ON r.id = c.referrer_id ORDER BY c.name LIMIT 5"),
    C("timestamp_date_bound", "SELECT count(*) FROM sq_orders WHERE created_at >= '2024-01-01' "
      "AND created_at < '2024-02-01'"),
    C("timestamp_date_bound", "SELECT count(*) FROM sq_orders WHERE paid_on BETWEEN '2024-01-01' AND '2024-01-31'"),
    C("timestamp_date_bound", "SELECT count(*) FROM sq_orders WHERE created_at <= '2024-02-15 23:59:59'"),
    C("timestamp_date_bound", "SELECT count(*) FROM sq_orders WHERE created_at::date <= '2024-02-15'"),
    C("timestamp_date_bound", "SELECT count(*) FROM sq_orders WHERE created_at < '2024-02-16'"),
    C("timestamp_date_bound", "SELECT count(*) FROM sq_orders WHERE created_at >= '2024-02-15'"),
    C("out_of_range", "SELECT count(*) FROM sq_orders WHERE created_at >= '2024-06-01'"),
    C("relative_range", "SELECT count(*) FROM sq_payments WHERE paid_at >= now() - interval '30 days'"),
    C("relative_range", "SELECT count(*) FROM sq_users WHERE created_at > current_date - 7 AND deleted_at IS NULL"),
    C("relative_range", "SELECT count(*) FROM sq_orders WHERE created_at < now() - interval '1 year'"),
    C("null_aggregate", "SELECT sum(total) FROM sq_orders WHERE status = 'PAID'"),
    C("null_aggregate", "SELECT max(shipped_at) FROM sq_orders WHERE status = 'NEW'"),
    C("unknown_value", "SELECT count(*) FROM sq_orders WHERE status = 'SHIPPED'"),
    C("unknown_value", "SELECT count(*) FROM sq_orders WHERE status = 'SHIPPED' AND amount_cents > 998"),
    C("soft_delete", "SELECT count(*) FROM sq_users WHERE tenant_id = 3 AND deleted_at IS NULL"),
    C("soft_delete", "SELECT sku, price FROM sq_products WHERE tenant_id = 4 AND NOT is_deleted ORDER BY sku LIMIT 10"),
    C("soft_delete", "SELECT count(*) FROM sq_users WHERE deleted_at IS NOT NULL"),
    C("soft_delete", "SELECT t.name, count(*) FROM sq_tenants t JOIN sq_users u ON u.tenant_id = t.id "
      "WHERE u.deleted_at IS NULL GROUP BY t.name ORDER BY t.name"),
    C("unknown_value", "SELECT plan FROM sq_tenants WHERE name = 't7'"),
    C("unknown_value", "SELECT count(*) FROM sq_customers WHERE name = 'c9999'"),
    # The probe finds the address (a deleted user's): the empty count is the right answer.
    C("unknown_value", "SELECT count(*) FROM sq_users WHERE email = 'u8@example.com' AND deleted_at IS NULL"),
    C("unknown_pattern", "SELECT count(*) FROM sq_orders WHERE status ILIKE 'ship%'"),
    C("unknown_pattern", "SELECT sum(qty) FROM sq_items WHERE sku LIKE 'sku1%'"),
    C("unknown_pattern", "SELECT count(*) FROM sq_customers WHERE name LIKE 'zz%'"),
    C("conditions_exclude", "SELECT count(*) FROM sq_orders WHERE status = 'SHIPPED' AND shipped_at IS NOT NULL"),
    C("conditions_exclude", "SELECT count(*) FROM sq_customers WHERE country = 'DE' AND churned_at IS NOT NULL"),
    C("conditions_exclude", "SELECT count(*) FROM sq_orders WHERE status = 'NEW' AND customer_id = 7"),
    C("assertion", "SELECT id, discount_pct FROM sq_orders ORDER BY id LIMIT 5"),
    C("assertion", "SELECT status, count(*) FILTER (WHERE shipped_at IS NOT NULL) * 1.0 / count(*) AS "
      "shipped_rate FROM sq_orders GROUP BY status ORDER BY status"),
    C("assertion", "SELECT id, amount FROM sq_payments ORDER BY id LIMIT 3"),
    C("declared_soft_delete", "SELECT count(*) FROM sq_coupons WHERE pct >= 20 AND retired_at IS NULL"),
    C("declared_soft_delete", "SELECT code FROM sq_coupons WHERE retired_at IS NULL ORDER BY pct DESC, id LIMIT 3"),
    C("arbitrary_rows", "SELECT id FROM sq_orders WHERE status = 'PAID' ORDER BY id LIMIT 5"),
]


def shop(pgwarden_bin, pg):
    """The schema and a daemon over it, for a module fixture: `shop = pytest.fixture(scope="module")(shop)`."""
    pg.execute(SCHEMA)
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield daemons.start(pg, overrides={"groups": {"passthrough": DECLARATIONS}})
    finally:
        daemons.teardown()
        pg.execute(f"DROP TABLE IF EXISTS {TABLES}")


def ask(client, sql, extended=False):
    """(codes of the screens' warnings, {code: hint}, the notices) for one statement."""
    _, _, notices = client.extended(sql) if extended else client.query(sql)
    codes, hints = [], {}
    for n in notices:
        detail = n.get("D", "")
        for code in SCREEN_CODES:
            if f'"code":"{code}"' in detail:
                codes.append(code)
                hints[code] = n.get("H", "")
    return codes, hints, notices


def per_class(results):
    """{class: Counter(flagged=, missed=, false=)} from (case, codes) pairs."""
    out = collections.defaultdict(collections.Counter)
    for case, codes in results:
        if case.code:
            out[case.cls]["flagged" if case.code in codes else "missed"] += 1
        else:
            out[case.cls]["correct"] += 1
            if codes:
                out[case.cls]["false"] += 1
    return out
