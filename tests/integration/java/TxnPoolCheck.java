// Transaction pooling with JDBC: many connections, each reusing its PreparedStatements (so the
// driver switches to named server-side statements after prepareThreshold uses), interleaved so
// that each connection's statements run on different server connections in turn. Every result
// is checked; prints OK at the end.
// Usage: java TxnPoolCheck PORT USER PASSWORD PREPARE_THRESHOLD CONNECTIONS

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

public final class TxnPoolCheck {
    private TxnPoolCheck() {}

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/analytics";
        Properties props = new Properties();
        props.setProperty("user", args[1]);
        props.setProperty("password", args[2]);
        props.setProperty("prepareThreshold", args[3]);
        props.setProperty("connectTimeout", "10");
        props.setProperty("socketTimeout", "60");
        int n = Integer.parseInt(args[4]);
        List<Connection> conns = new ArrayList<>();
        List<PreparedStatement[]> stmts = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                Connection c = DriverManager.getConnection(url, props);
                conns.add(c);
                stmts.add(new PreparedStatement[] {
                    c.prepareStatement("select ?::int * 2, ?::text || '-' || ?::int"),
                    c.prepareStatement("select count(*) from generate_series(1, ?::int)"),
                });
            }
            for (int round = 0; round < 12; round++) {
                for (int i = 0; i < n; i++) {
                    Connection c = conns.get(i);
                    boolean txn = (i + round) % 3 == 0;
                    c.setAutoCommit(!txn);
                    PreparedStatement a = stmts.get(i)[0];
                    a.setInt(1, i * 100 + round);
                    a.setString(2, "c" + i);
                    a.setInt(3, round);
                    try (ResultSet rs = a.executeQuery()) {
                        check(rs.next(), "row");
                        check(rs.getInt(1) == 2 * (i * 100 + round), "doubled " + rs.getInt(1));
                        check(("c" + i + "-" + round).equals(rs.getString(2)), "text " + rs.getString(2));
                    }
                    PreparedStatement b = stmts.get(i)[1];
                    b.setInt(1, i + round + 1);
                    try (ResultSet rs = b.executeQuery()) {
                        check(rs.next() && rs.getLong(1) == i + round + 1, "count");
                    }
                    if (txn) c.commit();
                }
            }
            // A statement closed on one connection does not disturb another's identical one.
            stmts.get(0)[0].close();
            PreparedStatement again = stmts.get(1)[0];
            again.setInt(1, 5);
            again.setString(2, "x");
            again.setInt(3, 1);
            try (ResultSet rs = again.executeQuery()) {
                check(rs.next() && rs.getInt(1) == 10, "after close");
            }
            System.out.println("OK");
        } finally {
            for (Connection c : conns) {
                try {
                    c.close();
                } catch (SQLException e) {
                    // closing is best effort
                }
            }
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) throw new IllegalStateException("wrong result: " + what);
    }
}
