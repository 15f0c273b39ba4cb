// Denials, warnings and truncation notices as a JDBC application sees them. Each statement given
// after "--" runs once as a Statement and once as a PreparedStatement; for each run the program
// prints key=value lines (prefix "<index>.<stmt|prep>."): the outcome, the rows read, the
// warnings (NoticeResponses) attached to the statement, and for an error its SQLState,
// getMessage() and the server's message, detail and hint. Newlines are printed as "\n". Then
// "after" and "show": the first column of SELECT 1 and of SHOW transaction_read_only, or
// "error <SQLState>".
// Usage: java DenialCheck JDBC_URL [property=value ...] -- SQL [SQL ...]
// The property autocommit=false turns autocommit off (with defaultRowFetchSize, pgjdbc then reads
// results in slices: Execute with a row count, PortalSuspended).

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.util.Properties;
import org.postgresql.util.PSQLException;
import org.postgresql.util.PSQLWarning;
import org.postgresql.util.ServerErrorMessage;

public final class DenialCheck {
    private DenialCheck() {}

    private static void put(String key, String value) {
        System.out.println(key + "=" + (value == null ? "null" : value.replace("\n", "\\n")));
    }

    private static String warnings(SQLWarning w) {
        StringBuilder sb = new StringBuilder();
        for (; w != null; w = w.getNextWarning()) {
            if (sb.length() > 0) sb.append(" | ");
            sb.append(w.getSQLState()).append(' ').append(w.getMessage());
            ServerErrorMessage m = w instanceof PSQLWarning
                ? ((PSQLWarning) w).getServerErrorMessage() : null;
            if (m != null && m.getDetail() != null) sb.append(' ').append(m.getDetail());
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("connectTimeout", "10");
        props.setProperty("socketTimeout", "60");
        int i = 1;
        for (; i < args.length && !args[i].equals("--"); i++) {
            int eq = args[i].indexOf('=');
            props.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        boolean autocommit = !"false".equals(props.remove("autocommit"));
        try (Connection conn = DriverManager.getConnection(args[0], props)) {
            conn.setAutoCommit(autocommit);
            int n = 0;
            for (i++; i < args.length; i++, n++) {
                for (String mode : new String[] {"stmt", "prep"}) {
                    run(conn, n + "." + mode + ".", mode, args[i]);
                }
            }
            // Every refusal left the session usable. A group whose policy service is down refuses
            // this query too (then "after" is "error" and its SQLState), but not session
            // housekeeping such as SHOW.
            after(conn, "after", "SELECT 1");
            after(conn, "show", "SHOW transaction_read_only");
        }
    }

    private static void after(Connection conn, String key, String sql) {
        try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            put(key, rs.next() ? rs.getString(1) : "no row");
        } catch (SQLException e) {
            put(key, "error " + e.getSQLState());
        }
    }

    private static void run(Connection conn, String prefix, String mode, String sql) {
        Statement s = null;
        try {
            boolean hasRows;
            if (mode.equals("stmt")) {
                s = conn.createStatement();
                hasRows = s.execute(sql);
            } else {
                PreparedStatement ps = conn.prepareStatement(sql);
                s = ps;
                hasRows = ps.execute();
            }
            int rows = 0;
            String fetchWarnings = "";
            if (hasRows) {
                try (ResultSet rs = s.getResultSet()) {
                    while (rs.next()) rows++;
                    // Notices that arrive while later slices are fetched belong to the ResultSet.
                    fetchWarnings = warnings(rs.getWarnings());
                }
            }
            put(prefix + "outcome", "ok");
            put(prefix + "rows", Integer.toString(rows));
            String all = warnings(s.getWarnings());
            put(prefix + "warnings", all.isEmpty() || fetchWarnings.isEmpty()
                ? all + fetchWarnings : all + " | " + fetchWarnings);
        } catch (SQLException e) {
            put(prefix + "outcome", "error");
            put(prefix + "sqlstate", e.getSQLState());
            put(prefix + "message", e.getMessage());
            ServerErrorMessage m = e instanceof PSQLException
                ? ((PSQLException) e).getServerErrorMessage() : null;
            if (m != null) {
                put(prefix + "primary", m.getMessage());
                put(prefix + "detail", m.getDetail());
                put(prefix + "hint", m.getHint());
            }
        } finally {
            if (s != null) {
                try {
                    s.close();
                } catch (SQLException ignored) {
                    // the statement is gone either way
                }
            }
        }
    }
}
