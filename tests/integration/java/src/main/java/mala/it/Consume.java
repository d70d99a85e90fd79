// Reads records with Apache Kafka's Java consumer without a consumer group: assign() the partitions, seek() each to
// the start offset, poll. Prints one JSON object per record: {"partition": P, "offset": O, "key": K, "value": V}.
//
// usage: Consume --bootstrap B --topic T [--partitions all|0,1,...] [--offset O] [--count N] [--timeout-ms MS]
//   --offset: where every assigned partition starts (-2 = seekToBeginning, the log start offset; default -2).
//   --count N: stop after N records; without it, stop once every partition reached the end offset it had when
//   the program started (endOffsets()).
// Exit code 0 when the count (or the end offsets) was reached before the timeout, 1 otherwise.
package mala.it;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class Consume {
  public static void main(String[] args) {
    Args a = new Args(args);
    String bootstrap = a.required("--bootstrap");
    String topic = a.required("--topic");
    String partitionsArg = a.get("--partitions", "all");
    long offset = Long.parseLong(a.get("--offset", "-2"));
    long count = Long.parseLong(a.get("--count", "-1"));
    long timeoutMs = Long.parseLong(a.get("--timeout-ms", "30000"));
    long deadline = System.currentTimeMillis() + timeoutMs;

    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, "mala-it-java-consumer");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
    props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");

    StringBuilder out = new StringBuilder();
    int exit = 0;
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> tps = new ArrayList<>();
      if (partitionsArg.equals("all")) {
        for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs))) {
          tps.add(new TopicPartition(topic, p.partition()));
        }
      } else {
        for (String p : partitionsArg.split(",")) tps.add(new TopicPartition(topic, Integer.parseInt(p.trim())));
      }
      tps.sort((x, y) -> Integer.compare(x.partition(), y.partition()));
      consumer.assign(tps);
      if (offset == -2) {
        consumer.seekToBeginning(tps);
      } else {
        for (TopicPartition tp : tps) consumer.seek(tp, offset);
      }
      Map<TopicPartition, Long> ends = count < 0 ? consumer.endOffsets(tps, Duration.ofMillis(timeoutMs)) : null;
      long got = 0;
      while (System.currentTimeMillis() < deadline) {
        if (count >= 0 && got >= count) break;
        if (ends != null && reachedEnd(consumer, ends)) break;
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          if (count >= 0 && got >= count) break;
          out.append("{\"partition\":").append(r.partition()).append(",\"offset\":").append(r.offset())
              .append(",\"key\":").append(Json.str(r.key())).append(",\"value\":").append(Json.str(r.value()))
              .append("}\n");
          got++;
        }
      }
      boolean done = count >= 0 ? got >= count : reachedEnd(consumer, ends);
      if (!done) {
        System.err.println("Consume: timed out after " + timeoutMs + " ms with " + got + " records");
        exit = 1;
      }
    } catch (Exception e) {
      e.printStackTrace();
      exit = 1;
    }
    System.out.print(out);
    System.out.flush();
    System.exit(exit);
  }

  static boolean reachedEnd(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> ends) {
    for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
      if (consumer.position(e.getKey(), Duration.ofSeconds(10)) < e.getValue()) return false;
    }
    return true;
  }
}
