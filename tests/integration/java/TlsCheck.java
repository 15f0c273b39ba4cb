// JDBC over TLS through pgwarden: connects with the URL and properties given (key=value), runs
// one query and prints key=value lines for the pytest side: ok, the result, or the SQLState and
// message of the failure.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

public class TlsCheck {
  public static void main(String[] args) throws Exception {
    String url = args[0];
    Properties props = new Properties();
    for (int i = 1; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      props.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    try (Connection c = DriverManager.getConnection(url, props);
         Statement st = c.createStatement();
         ResultSet rs = st.executeQuery("SELECT count(*) FROM fct_shipments WHERE 1 = 1")) {
      rs.next();
      System.out.println("ok=true");
      System.out.println("count=" + rs.getLong(1));
    } catch (SQLException e) {
      System.out.println("ok=false");
      System.out.println("sqlstate=" + e.getSQLState());
      System.out.println("message=" + String.valueOf(e.getMessage()).replace('\n', ' '));
    }
  }
}
