"""What the guarded-writes tests share (docs/writes.md): a write role for upstream.write_user and
the w_items table it may change."""

import pgwtest

ROWS = 400


def create_write_role(pg, role, password):
    """A plain login role that may connect and use the public schema."""
    pg.execute(f"DROP ROLE IF EXISTS {role}")
    pg.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    pg.execute(f"GRANT CONNECT ON DATABASE {pgwtest.DATABASE} TO {role}")
    pg.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
    return role


def reset_table(pg, write_role):
    """w_items(id, grp, qty) with ROWS rows (grp = id % 100, qty 0), writable by `write_role` and
    readable by the read-only role."""
    pg.execute("DROP TABLE IF EXISTS w_items")
    pg.execute("CREATE TABLE w_items (id int PRIMARY KEY, grp int NOT NULL, qty int NOT NULL)")
    pg.execute(f"INSERT INTO w_items SELECT g, g % 100, 0 FROM generate_series(1, {ROWS}) g")
    pg.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON w_items TO {write_role}")
    pg.execute(f"GRANT SELECT ON w_items TO {pgwtest.READER_ROLE}")
