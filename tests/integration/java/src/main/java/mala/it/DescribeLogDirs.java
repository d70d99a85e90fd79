// Runs Apache Kafka's Java Admin.describeLogDirs for some brokers and prints one JSON object per log dir:
// {"broker": B, "dir": "/path", "cordoned": true|false} (KIP-1066's LogDirDescription.isCordoned, DescribeLogDirs v5).
//
// usage: DescribeLogDirs --bootstrap B --brokers 1,2,3
// Exit code 0 on success; on failure the exception goes to stderr and the exit code is 1.
package mala.it;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.LogDirDescription;

public final class DescribeLogDirs {
  public static void main(String[] args) throws Exception {
    Args a = new Args(args);
    String bootstrap = a.required("--bootstrap");
    List<Integer> brokers = new ArrayList<>();
    for (String b : a.required("--brokers").split(",")) brokers.add(Integer.parseInt(b.trim()));
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
    try (Admin admin = Admin.create(props)) {
      Map<Integer, Map<String, LogDirDescription>> all =
          admin.describeLogDirs(brokers).allDescriptions().get(25, TimeUnit.SECONDS);
      for (Map.Entry<Integer, Map<String, LogDirDescription>> broker : new TreeMap<>(all).entrySet()) {
        for (Map.Entry<String, LogDirDescription> dir : new TreeMap<>(broker.getValue()).entrySet()) {
          System.out.println("{\"broker\":" + broker.getKey() + ",\"dir\":" + Json.str(dir.getKey())
              + ",\"cordoned\":" + dir.getValue().isCordoned() + "}");
        }
      }
    } catch (Exception e) {
      e.printStackTrace();
      System.exit(1);
    }
  }
}
