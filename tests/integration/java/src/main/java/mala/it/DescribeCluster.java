// Runs Apache Kafka's Java AdminClient describeCluster() against a bootstrap server and prints the result as one
// JSON object: {"clusterId": ..., "controller": {"id","host","port","rack"} | null, "nodes": [...]}.
// Used by tests/integration to compare what the Java client sees with what librdkafka (kcat) sees.
// Exit code 0 on success; on failure the exception goes to stderr and the exit code is 1.
package mala.it;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.common.Node;

public final class DescribeCluster {
  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: DescribeCluster <bootstrap-server>");
      System.exit(2);
    }
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
    try (Admin admin = Admin.create(props)) {
      DescribeClusterResult result = admin.describeCluster(new DescribeClusterOptions().timeoutMs(20000));
      String clusterId = result.clusterId().get(25, TimeUnit.SECONDS);
      Node controller = result.controller().get(25, TimeUnit.SECONDS);
      Collection<Node> nodes = result.nodes().get(25, TimeUnit.SECONDS);
      List<Node> sorted = new ArrayList<>(nodes);
      sorted.sort(Comparator.comparingInt(Node::id));
      StringBuilder out = new StringBuilder();
      out.append("{\"clusterId\":").append(Json.str(clusterId));
      out.append(",\"controller\":").append(node(controller));
      out.append(",\"nodes\":[");
      for (int i = 0; i < sorted.size(); i++) {
        if (i > 0) out.append(',');
        out.append(node(sorted.get(i)));
      }
      out.append("]}");
      System.out.println(out);
    } catch (Exception e) {
      e.printStackTrace();
      System.exit(1);
    }
  }

  private static String node(Node n) {
    if (n == null || n.isEmpty()) return "null";
    return "{\"id\":" + n.id() + ",\"host\":" + Json.str(n.host()) + ",\"port\":" + n.port()
        + ",\"rack\":" + Json.str(n.rack()) + "}";
  }
}
