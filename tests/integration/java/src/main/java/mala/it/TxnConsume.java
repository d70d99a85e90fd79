// Reads a topic with Apache Kafka's Java consumer at a chosen isolation level, without a consumer group: assign()
// every partition, seekToBeginning, poll until each partition's position reached the end offset endOffsets() gave at
// the start (for read_committed that is the last stable offset, for read_uncommitted the high watermark), then keep
// polling until nothing arrived for --idle-ms. Prints one JSON line per record, {"partition": P, "offset": O,
// "key": K, "value": V}, then one summary line {"isolation": I, "end_offsets": {"P": O...}, "positions": {"P": O...},
// "records": N}.
//
// usage: TxnConsume --bootstrap B --topic T --isolation read_committed|read_uncommitted [--idle-ms MS]
//                   [--timeout-ms MS]
// Exit code 0 when every partition reached its end offset before the timeout, 1 otherwise.
package mala.it;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class TxnConsume {
  public static void main(String[] args) {
    Args a = new Args(args);
    String bootstrap = a.required("--bootstrap");
    String topic = a.required("--topic");
    String isolation = a.required("--isolation");
    long idleMs = Long.parseLong(a.get("--idle-ms", "500"));
    long timeoutMs = Long.parseLong(a.get("--timeout-ms", "30000"));
    long deadline = System.currentTimeMillis() + timeoutMs;

    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, "mala-it-txn-consumer");
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
    props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");

    StringBuilder out = new StringBuilder();
    int exit = 0;
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> tps = new ArrayList<>();
      for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs))) {
        tps.add(new TopicPartition(topic, p.partition()));
      }
      tps.sort((x, y) -> Integer.compare(x.partition(), y.partition()));
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofMillis(timeoutMs));
      long got = 0;
      long lastRecordAt = System.currentTimeMillis();
      boolean reached = false;
      while (System.currentTimeMillis() < deadline) {
        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
        for (ConsumerRecord<String, String> r : batch) {
          out.append("{\"partition\":").append(r.partition()).append(",\"offset\":").append(r.offset())
              .append(",\"key\":").append(Json.str(r.key())).append(",\"value\":").append(Json.str(r.value()))
              .append("}\n");
          got++;
        }
        if (!batch.isEmpty()) lastRecordAt = System.currentTimeMillis();
        if (!reached) reached = Consume.reachedEnd(consumer, ends);
        if (reached && System.currentTimeMillis() - lastRecordAt >= idleMs) break;
      }
      if (!reached) {
        System.err.println("TxnConsume: timed out after " + timeoutMs + " ms with " + got + " records");
        exit = 1;
      }
      StringBuilder endsJson = new StringBuilder("{");
      StringBuilder posJson = new StringBuilder("{");
      for (TopicPartition tp : tps) {
        if (endsJson.length() > 1) {
          endsJson.append(',');
          posJson.append(',');
        }
        endsJson.append('"').append(tp.partition()).append("\":").append(ends.get(tp));
        posJson.append('"').append(tp.partition()).append("\":").append(consumer.position(tp, Duration.ofSeconds(10)));
      }
      out.append("{\"isolation\":").append(Json.str(isolation)).append(",\"end_offsets\":").append(endsJson)
          .append("},\"positions\":").append(posJson).append("},\"records\":").append(got).append("}\n");
    } catch (Exception e) {
      e.printStackTrace();
      exit = 1;
    }
    System.out.print(out);
    System.out.flush();
    System.exit(exit);
  }
}
