// Runs statements through pgjdbc as server-prepared statements (prepareThreshold=1, binary
// transfer where the driver uses it), one connection per file, and prints what the driver handed
// back for each: result sets (column labels and types, values by getString), update counts,
// warnings, or the error's SQLSTATE and the server's fields. The integration test runs it
// straight against PostgreSQL and through pgwarden and compares the outputs statement by statement.
// Usage: java RegressCheck JDBC_URL STATEMENTS_FILE [property=value ...]
// STATEMENTS_FILE: lines "F <file name>" and "S <index> <statement, base64 of UTF-8>".
// Output: lines "R <file name> <index> <result, base64 of UTF-8>".

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Properties;

import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

public final class RegressCheck {
    private RegressCheck() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("connectTimeout", "10");
        props.setProperty("socketTimeout", "60");
        props.setProperty("prepareThreshold", "1");
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        String file = null;
        List<String[]> statements = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8)) {
            if (line.startsWith("F ")) {
                if (file != null) runFile(args[0], props, file, statements);
                file = line.substring(2);
                statements.clear();
            } else if (line.startsWith("S ")) {
                String[] f = line.split(" ", 3);
                statements.add(new String[] {f[1], new String(Base64.getDecoder().decode(f[2]),
                        StandardCharsets.UTF_8)});
            }
        }
        if (file != null) runFile(args[0], props, file, statements);
    }

    private static void runFile(String url, Properties props, String file,
            List<String[]> statements)
            throws SQLException {
        Connection conn = DriverManager.getConnection(url, props);
        try {
            for (int i = 0; i < statements.size(); i++) {
                StringBuilder out = new StringBuilder();
                try (PreparedStatement ps = conn.prepareStatement(statements.get(i)[1])) {
                    boolean isResult = ps.execute();
                    while (true) {
                        if (isResult) {
                            try (ResultSet rs = ps.getResultSet()) {
                                rows(rs, out);
                            }
                        } else {
                            int count = ps.getUpdateCount();
                            if (count == -1) break;
                            out.append("count ").append(count).append('\n');
                        }
                        isResult = ps.getMoreResults();
                    }
                    warnings(ps.getWarnings(), out);
                } catch (SQLException e) {
                    error(e, out);
                }
                if (!conn.isClosed()) {
                    warnings(conn.getWarnings(), out);
                    conn.clearWarnings();
                } else {
                    out.append("connection closed\n");
                }
                String encoded = Base64.getEncoder().encodeToString(
                        out.toString().getBytes(StandardCharsets.UTF_8));
                System.out.println("R " + file + " " + statements.get(i)[0] + " " + encoded);
                if (conn.isClosed()) conn = DriverManager.getConnection(url, props);
            }
        } finally {
            conn.close();
        }
    }

    private static void rows(ResultSet rs, StringBuilder out) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        out.append("columns");
        for (int c = 1; c <= md.getColumnCount(); c++) {
            out.append(' ').append(md.getColumnLabel(c)).append(':').append(md.getColumnTypeName(c));
        }
        out.append('\n');
        while (rs.next()) {
            for (int c = 1; c <= md.getColumnCount(); c++) {
                Object o = rs.getObject(c);
                String v = o instanceof byte[] ? hex((byte[]) o) : rs.getString(c);
                out.append(c > 1 ? "|" : "").append(v == null ? "NULL" : v.replace("\\", "\\\\")
                        .replace("|", "\\|").replace("\n", "\\n"));
            }
            out.append('\n');
        }
        warnings(rs.getWarnings(), out);
    }

    private static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder("\\x");
        for (byte b : bytes) sb.append(String.format("%02x", b & 0xff));
        return sb.toString();
    }

    private static void warnings(SQLWarning w, StringBuilder out) {
        for (; w != null; w = w.getNextWarning()) {
            out.append("warning ").append(w.getSQLState()).append(' ').append(w.getMessage())
                    .append('\n');
        }
    }

    private static void error(SQLException e, StringBuilder out) {
        out.append("error ").append(e.getSQLState()).append(' ').append(e.getMessage()).append('\n');
        if (e instanceof PSQLException) {
            ServerErrorMessage m = ((PSQLException) e).getServerErrorMessage();
            if (m != null) {
                out.append("detail ").append(m.getDetail()).append('\n');
                out.append("hint ").append(m.getHint()).append('\n');
                out.append("position ").append(m.getPosition()).append('\n');
                out.append("where ").append(m.getWhere()).append('\n');
            }
        }
    }
}
