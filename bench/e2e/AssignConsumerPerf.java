// Consumer throughput with Apache Kafka's Java consumer WITHOUT a consumer group: assign() every partition of the
// topic, seekToBeginning(), poll until the requested number of records arrived. Apache Kafka's own
// ConsumerPerformance (kafka-consumer-perf-test.sh) always subscribe()s, so it needs the group coordinator
// (FindCoordinator/JoinGroup or KIP-848 ConsumerGroupHeartbeat); this program measures the same thing against a
// broker that serves only Fetch/ListOffsets/Metadata. Its settings mirror ConsumerPerformance's defaults
// (ByteArrayDeserializer, receive.buffer.bytes 2 MiB, max.partition.fetch.bytes 1 MiB) so the numbers are
// comparable.
//
// Compiled and run by bench/e2e/compare.py (javac against kafka-clients; not part of the CMake build).
// usage: AssignConsumerPerf BOOTSTRAP TOPIC NUM_RECORDS TIMEOUT_MS
// Prints one line: "records=N bytes=B seconds=S" (S from the first poll() call to the last record) and exits 0, or
// exits 1 with a message when fewer records arrived before TIMEOUT_MS of no progress.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class AssignConsumerPerf {
  public static void main(String[] args) {
    if (args.length != 4) {
      System.err.println("usage: AssignConsumerPerf BOOTSTRAP TOPIC NUM_RECORDS TIMEOUT_MS");
      System.exit(2);
    }
    String bootstrap = args[0];
    String topic = args[1];
    long want = Long.parseLong(args[2]);
    long idleTimeoutMs = Long.parseLong(args[3]);

    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, "mala-bench-assign-consumer");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, "2097152");
    props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "1048576");

    int exit = 0;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> tps = new ArrayList<>();
      for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
        tps.add(new TopicPartition(topic, p.partition()));
      }
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      long records = 0;
      long bytes = 0;
      long start = System.nanoTime();
      long last = start;
      long lastProgressMs = System.currentTimeMillis();
      while (records < want) {
        ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
        if (batch.isEmpty()) {
          if (System.currentTimeMillis() - lastProgressMs > idleTimeoutMs) break;
          continue;
        }
        for (ConsumerRecord<byte[], byte[]> r : batch) {
          records++;
          if (r.value() != null) bytes += r.value().length;
          if (r.key() != null) bytes += r.key().length;
        }
        last = System.nanoTime();
        lastProgressMs = System.currentTimeMillis();
      }
      double seconds = (last - start) / 1e9;
      System.out.printf("records=%d bytes=%d seconds=%.6f%n", records, bytes, seconds);
      if (records < want) {
        System.err.printf("AssignConsumerPerf: only %d of %d records before %d ms without progress%n", records, want,
            idleTimeoutMs);
        exit = 1;
      }
    } catch (Exception e) {
      e.printStackTrace();
      exit = 1;
    }
    System.out.flush();
    System.exit(exit);
  }
}
