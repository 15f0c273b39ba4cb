// JDBC checks of the agent features, printed as key=value lines for the pytest side to read:
//   budget URL props...   runs "SELECT 1" through a PreparedStatement 6 times (extended protocol,
//                         server-side prepared after the threshold) and reports how many passed
//                         and the SQLState, message and server detail of the first refusal.
//   context URL props...  SET and SHOW pgwarden.* through a Statement and PreparedStatements
//                         (extended protocol), then what a Lua guard and the server see.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

public class AgentCheck {
  public static void main(String[] args) throws Exception {
    String scenario = args[0];
    String url = args[1];
    Properties props = new Properties();
    for (int i = 2; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      props.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    try (Connection c = DriverManager.getConnection(url, props)) {
      if (scenario.equals("budget")) {
        int passed = 0;
        String firstError = null;
        String state = null;
        try (PreparedStatement ps = c.prepareStatement("SELECT 1")) {
          for (int i = 0; i < 6; i++) {
            try (ResultSet rs = ps.executeQuery()) {
              while (rs.next()) {
              }
              passed++;
            } catch (SQLException e) {
              if (firstError == null) {
                firstError = e.getMessage().replace('\n', ' ');
                state = e.getSQLState();
              }
            }
          }
        }
        System.out.println("passed=" + passed);
        System.out.println("sqlstate=" + state);
        System.out.println("message=" + firstError);
        // The session still answers after the refusals (with the same refusal: the budget is spent).
        try (PreparedStatement ps = c.prepareStatement("SELECT 2");
             ResultSet rs = ps.executeQuery()) {
          System.out.println("after=row:" + rs.next());
        } catch (SQLException e) {
          System.out.println("after=" + e.getSQLState());
        }
      } else if (scenario.equals("context")) {
        try (Statement st = c.createStatement()) {
          st.execute("SET pgwarden.agent_id = 'j-agent'");
          System.out.println("set=ok");
          try (ResultSet rs = st.executeQuery("SHOW pgwarden.agent_id")) {
            rs.next();
            System.out.println("show=" + rs.getString(1));
          }
        }
        try (PreparedStatement ps = c.prepareStatement("SET pgwarden.conversation_id = 'j-conv'")) {
          ps.execute();
        }
        try (PreparedStatement ps = c.prepareStatement("SHOW pgwarden.conversation_id");
             ResultSet rs = ps.executeQuery()) {
          rs.next();
          System.out.println("prepared_show=" + rs.getString(1));
        }
        try (Statement st = c.createStatement()) {
          try (ResultSet rs = st.executeQuery("SELECT 'echo_ctx'")) {
            System.out.println("echo=allowed");
          } catch (SQLException e) {
            System.out.println("echo=" + e.getMessage().replace('\n', ' '));
          }
          try (ResultSet rs = st.executeQuery("SELECT current_setting('pgwarden.agent_id', true)")) {
            rs.next();
            System.out.println("server_setting=" + rs.getString(1));
          }
        }
      } else {
        throw new IllegalArgumentException("unknown scenario " + scenario);
      }
    }
  }
}
