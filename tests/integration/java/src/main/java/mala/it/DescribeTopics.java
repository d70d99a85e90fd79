// Runs Apache Kafka's Java AdminClient describeTopics() for the given topic names and prints one JSON object per
// topic on its own line: {"topic": ..., "error": <exception class simple name> | null, "partitions": N}.
// Kafka 4.x sends DescribeTopicPartitions (API 75) and falls back to Metadata when the broker does not offer it.
package mala.it;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;

public final class DescribeTopics {
  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println("usage: DescribeTopics <bootstrap-server> <topic>...");
      System.exit(2);
    }
    List<String> topics = Arrays.asList(args).subList(1, args.length);
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
    try (Admin admin = Admin.create(props)) {
      Map<String, KafkaFuture<TopicDescription>> futures =
          admin.describeTopics(topics, new DescribeTopicsOptions().timeoutMs(20000)).topicNameValues();
      for (String topic : topics) {
        String error = null;
        int partitions = -1;
        try {
          partitions = futures.get(topic).get(25, TimeUnit.SECONDS).partitions().size();
        } catch (ExecutionException e) {
          error = e.getCause().getClass().getSimpleName();
        }
        System.out.println("{\"topic\":" + Json.str(topic) + ",\"error\":" + Json.str(error)
            + ",\"partitions\":" + partitions + "}");
      }
    } catch (Exception e) {
      e.printStackTrace();
      System.exit(1);
    }
  }
}
