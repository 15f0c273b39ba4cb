// JDBC scenarios the integration tests run against pgwarden and, for comparison, against the
// server directly. Each scenario prints facts as key=value lines; the Python side asserts on them.
// Usage: java JdbcCheck SCENARIO JDBC_URL [property=value ...]

import java.math.BigDecimal;
import java.sql.BatchUpdateException;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.Date;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

public final class JdbcCheck {
    private JdbcCheck() {}

    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        Properties props = new Properties();
        props.setProperty("connectTimeout", "10");
        props.setProperty("socketTimeout", "60");
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        try (Connection conn = DriverManager.getConnection(args[1], props)) {
            switch (scenario) {
                case "types": types(conn); break;
                case "fetch": fetch(conn); break;
                case "metadata": metadata(conn); break;
                case "cancel": cancel(conn); break;
                case "batch": batch(conn); break;
                case "identity": identity(conn); break;
                case "errors": errors(conn); break;
                case "screen": screen(conn); break;
                case "writes": writes(conn); break;
                default: throw new IllegalArgumentException("unknown scenario " + scenario);
            }
        }
    }

    private static void out(String key, Object value) {
        System.out.println(key + "=" + value);
    }

    // PreparedStatement with int/text/date/numeric/boolean/null parameters, run often enough that
    // the driver switches to a named server-side statement (prepareThreshold, default 5).
    private static void types(Connection conn) throws SQLException {
        try (PreparedStatement ps = conn.prepareStatement(
                "select ?::int, ?::text, ?::date, ?::numeric, ?::boolean, ?::text, ?::bigint")) {
            for (int round = 0; round < 7; round++) {
                ps.setInt(1, 42 + round);
                ps.setString(2, "it's \"quoted\" \u00fcn\u00efcode");
                ps.setDate(3, Date.valueOf("2024-02-29"));
                ps.setBigDecimal(4, new BigDecimal("12345.678901234567890"));
                ps.setBoolean(5, round % 2 == 0);
                ps.setNull(6, Types.VARCHAR);
                ps.setLong(7, 9_000_000_000L);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    StringBuilder sb = new StringBuilder();
                    for (int c = 1; c <= 7; c++) {
                        String v = rs.getString(c);
                        sb.append(c > 1 ? "|" : "").append(rs.wasNull() ? "NULL" : v);
                    }
                    out("row" + round, sb);
                }
            }
        }
        try (PreparedStatement ps = conn.prepareStatement(
                "select count(*), sum(weight) from fct_shipments "
                + "where ship_date between ? and ? and carrier = ? and status <> ?")) {
            for (int round = 0; round < 6; round++) {
                ps.setDate(1, Date.valueOf("2023-05-01"));
                ps.setDate(2, Date.valueOf("2023-05-31"));
                ps.setString(3, "DHL");
                ps.setString(4, "RETURNED");
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    out("agg" + round, rs.getLong(1) + "|" + rs.getBigDecimal(2));
                }
            }
        }
    }

    // setFetchSize on a large result with autocommit off: the driver sends Execute with a row
    // limit and the server answers PortalSuspended until the result is drained.
    private static void fetch(Connection conn) throws SQLException {
        conn.setAutoCommit(false);
        try (Statement st = conn.createStatement()) {
            st.setFetchSize(100);
            long count = 0, sum = 0, previous = 0;
            boolean ordered = true;
            try (ResultSet rs = st.executeQuery(
                    "select id, status from fct_shipments where id <= 10000 order by id")) {
                while (rs.next()) {
                    long id = rs.getLong(1);
                    ordered &= id == previous + 1;
                    previous = id;
                    count++;
                    sum += id;
                }
            }
            out("count", count);
            out("sum", sum);
            out("ordered", ordered);
        }
        conn.commit();
    }

    private static void metadata(Connection conn) throws SQLException {
        DatabaseMetaData md = conn.getMetaData();
        List<String> tables = new ArrayList<>();
        try (ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE"})) {
            while (rs.next()) {
                tables.add(rs.getString("TABLE_NAME"));
            }
        }
        tables.sort(null);
        out("tables", String.join(",", tables));
        List<String> columns = new ArrayList<>();
        try (ResultSet rs = md.getColumns(null, "public", "fct_shipments", "%")) {
            while (rs.next()) {
                columns.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME"));
            }
        }
        out("columns", String.join(",", columns));
        out("product", md.getDatabaseProductName() + " " + md.getDatabaseMajorVersion());
        out("readonly_tx", conn.isReadOnly());
    }

    // Statement.cancel() from another thread while pg_sleep runs: the driver opens a new
    // connection and sends a CancelRequest with the key pgwarden handed out.
    private static void cancel(Connection conn) throws Exception {
        try (Statement st = conn.createStatement()) {
            Thread canceller = new Thread(() -> {
                try {
                    Thread.sleep(1000);
                    st.cancel();
                } catch (Exception e) {
                    out("cancel_thread_error", e);
                }
            });
            long started = System.nanoTime();
            canceller.start();
            try {
                st.executeQuery("select pg_sleep(30)");
                out("outcome", "completed");
            } catch (SQLException e) {
                out("outcome", "error");
                out("sqlstate", e.getSQLState());
                out("message", e.getMessage().replace('\n', ' '));
            }
            out("elapsed_ms", (System.nanoTime() - started) / 1_000_000);
            canceller.join();
            try (ResultSet rs = st.executeQuery("select 'after cancel'")) {
                rs.next();
                out("after", rs.getString(1));
            }
        }
    }

    // A pipelined batch of selects (one Parse/Bind/Execute per statement and a single Sync), and
    // executeBatch of selects (which the driver itself rejects: a batch expects no results).
    private static void batch(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement()) {
            boolean isResult = st.execute(
                "select 1; select 'two', 2; select count(*) from fct_shipments where id <= 500;"
                + " select id from fct_shipments where id in (1, 2, 3) order by id");
            int n = 0;
            while (true) {
                if (isResult) {
                    try (ResultSet rs = st.getResultSet()) {
                        StringBuilder sb = new StringBuilder();
                        int cols = rs.getMetaData().getColumnCount();
                        while (rs.next()) {
                            for (int c = 1; c <= cols; c++) {
                                sb.append(c > 1 ? "," : "").append(rs.getString(c));
                            }
                            sb.append(';');
                        }
                        out("result" + n, sb);
                    }
                } else if (st.getUpdateCount() == -1) {
                    break;
                }
                n++;
                isResult = st.getMoreResults();
            }
            out("results", n);
        }
        try (PreparedStatement ps = conn.prepareStatement(
                "select count(*) from fct_shipments where id <= ?")) {
            for (int i = 1; i <= 3; i++) {
                ps.setInt(1, i * 10);
                ps.addBatch();
            }
            try {
                int[] counts = ps.executeBatch();
                out("execute_batch", counts.length);
            } catch (BatchUpdateException e) {
                out("execute_batch_error", e.getMessage().replaceAll("\\s+", " ").split(" Call ")[0]);
            }
        }
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("select 'ok'")) {
            rs.next();
            out("after", rs.getString(1));
        }
    }

    private static void identity(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("select current_setting('application_name'), 1")) {
            rs.next();
            out("application_name", rs.getString(1));
            out("one", rs.getInt(2));
        }
    }

    // Server errors in the extended protocol: the statement fails, the connection goes on.
    private static void errors(Connection conn) throws SQLException {
        try (PreparedStatement ps = conn.prepareStatement("select 1 / ?::int")) {
            ps.setInt(1, 0);
            ps.executeQuery();
            out("div", "no error");
        } catch (SQLException e) {
            out("div_sqlstate", e.getSQLState());
        }
        try (Statement st = conn.createStatement()) {
            st.executeUpdate("insert into scratch values (200, 'jdbc')");
            out("insert", "no error");
        } catch (SQLException e) {
            out("insert_sqlstate", e.getSQLState());
        }
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("select pgw_notice('jdbc notice')")) {
            rs.next();
            SQLWarning w = st.getWarnings();
            out("warning", w == null ? "none" : w.getMessage());
        }
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("select 'ok'")) {
            rs.next();
            out("after", rs.getString(1));
        }
    }

    // Guarded writes (test_writes.py) with setAutoCommit(false): look, a write meant for 4 rows
    // that matches 400 (undone), the 4-row write, COMMIT. With preferQueryMode=simple every
    // statement is a simple Query; by default writes go through Parse/Bind/Execute.
    private static void writes(Connection conn) throws SQLException {
        conn.setAutoCommit(false);
        try (Statement st = conn.createStatement()) {
            try (ResultSet rs = st.executeQuery("SELECT count(*) FROM w_items WHERE id < 5")) {
                rs.next();
                out("looked", rs.getLong(1));
            }
            try {
                out("wide", st.executeUpdate("UPDATE w_items SET qty = 8 WHERE id > 0"));
            } catch (SQLException e) {
                out("wide_sqlstate", e.getSQLState());
                out("wide_message", e.getMessage().replace('\n', ' '));
            }
            try {
                out("narrow", st.executeUpdate("UPDATE w_items SET qty = 8 WHERE id < 5"));
            } catch (SQLException e) {
                out("narrow_sqlstate", e.getSQLState());
                out("narrow_message", e.getMessage().replace('\n', ' '));
            }
            SQLWarning w = st.getWarnings();
            out("warning", w == null ? "none" : w.getMessage());
        }
        int prepared = 0;
        try (PreparedStatement ps = conn.prepareStatement("UPDATE w_items SET qty = ? WHERE id = ?")) {
            for (int id = 10; id < 16; id++) {
                ps.setInt(1, 9);
                ps.setInt(2, id);
                prepared += ps.executeUpdate();
            }
        } catch (SQLException e) {
            out("prepared_sqlstate", e.getSQLState());
            out("prepared_message", e.getMessage().replace('\n', ' '));
        }
        out("prepared", prepared);
        conn.commit();
        out("committed", "yes");
    }

    // A result screen on a bound parameter (test_answers.py): the status is in Bind, not in the
    // text; run often enough that pgjdbc switches to a named server-side statement.
    private static void screen(Connection conn) throws SQLException {
        try (PreparedStatement ps = conn.prepareStatement(
                "select count(*) from answer_shipments where status = ?")) {
            String[] values = {"late", "DELAYED", "late", "late", "late", "late", "late"};
            for (int round = 0; round < values.length; round++) {
                ps.setString(1, values[round]);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    out(round + ".count", rs.getLong(1));
                }
                SQLWarning w = ps.getWarnings();
                out(round + ".warning", w == null ? "none" : w.getSQLState() + " " + w.getMessage());
                ps.clearWarnings();
            }
        }
    }
}
