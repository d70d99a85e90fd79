// Produces records with Apache Kafka's Java producer, left at its defaults where the test does not say otherwise:
// acks=all, enable.idempotence=true (InitProducerId + sequence numbers), the built-in partitioner (murmur2 of the
// key, KIP-480 sticky partitioning for keyless records). Prints one JSON object per record, in send order, once
// every record is acknowledged: {"partition": P, "offset": O, "key": K, "value": V}.
//
// usage: Produce --bootstrap B --topic T --count N [--key-prefix K] [--key-count C] [--value-prefix V]
//                [--partition P] [--interval-ms M] [--prop name=value]... [--init-transactions true]
//                [--tombstones true]
//   record i gets key <K><i % C> (C defaults to N; no key when K is absent) and value <V><i> (no value, a
//   tombstone of a compacted topic, with --tombstones true); with --interval-ms
//   the sends are spread out (M ms between two), so that the producer runs across failures a test injects.
//   --init-transactions true: initTransactions() first (with --prop transactional.id=...), as a transactional
//   application does before its first send.
// Exit code 0 when every record was acknowledged, 1 otherwise (the first error goes to stderr).
package mala.it;

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Produce {
  public static void main(String[] args) {
    Args a = new Args(args);
    String bootstrap = a.required("--bootstrap");
    String topic = a.required("--topic");
    int count = Integer.parseInt(a.get("--count", "1"));
    String keyPrefix = a.get("--key-prefix", null);
    int keyCount = Integer.parseInt(a.get("--key-count", String.valueOf(count)));
    String valuePrefix = a.get("--value-prefix", "value-");
    int partition = Integer.parseInt(a.get("--partition", "-1"));
    long intervalMs = Long.parseLong(a.get("--interval-ms", "0"));
    boolean initTransactions = Boolean.parseBoolean(a.get("--init-transactions", "false"));
    boolean tombstones = Boolean.parseBoolean(a.get("--tombstones", "false"));

    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "mala-it-java-producer");
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
    props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
    for (String p : a.all("--prop")) {
      int eq = p.indexOf('=');
      if (eq <= 0) Args.usage("bad --prop " + p);
      props.put(p.substring(0, eq), p.substring(eq + 1));
    }

    List<ProducerRecord<String, String>> records = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      String key = keyPrefix == null ? null : keyPrefix + (i % keyCount);
      String value = tombstones ? null : valuePrefix + i;
      records.add(partition >= 0 ? new ProducerRecord<>(topic, partition, key, value)
                                 : new ProducerRecord<>(topic, key, value));
    }
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
      if (initTransactions) producer.initTransactions();
      List<Future<RecordMetadata>> futures = new ArrayList<>(count);
      for (ProducerRecord<String, String> r : records) {
        futures.add(producer.send(r));
        if (intervalMs > 0) Thread.sleep(intervalMs);
      }
      producer.flush();
      StringBuilder out = new StringBuilder();
      for (int i = 0; i < count; i++) {
        RecordMetadata md = futures.get(i).get(180, TimeUnit.SECONDS);
        ProducerRecord<String, String> r = records.get(i);
        out.append("{\"partition\":").append(md.partition()).append(",\"offset\":").append(md.offset())
            .append(",\"key\":").append(Json.str(r.key())).append(",\"value\":").append(Json.str(r.value()))
            .append("}\n");
      }
      System.out.print(out);
      System.out.flush();
    } catch (Exception e) {
      e.printStackTrace();
      System.exit(1);
    }
  }
}
