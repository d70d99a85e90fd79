// Consume-transform-produce with exactly-once semantics, as a Kafka Streams task or a hand-written EOS loop does it:
// a read_committed group consumer (group --group, subscribe to --input, auto-commit off) and a transactional
// producer (--transactional-id). Each poll's records become one transaction: every record is copied to --output
// (same partition, same key, value "copy:<value>"), the consumer's next offsets are added with
// sendOffsetsToTransaction(offsets, consumer.groupMetadata()), and the transaction is committed, or aborted when
// --abort-every K > 0 and this is the K-th, 2K-th... transaction (then the consumer seeks back to the group's
// committed offsets, so the aborted batch is read and copied again in a later transaction). Stops once a commit
// brought every input partition to the end offset it had at the start.
//
// usage: TxnCopy --bootstrap B --input IN --output OUT --group G --transactional-id ID [--abort-every K]
//                [--max-poll-records R] [--halt-after-commits H] [--timeout-ms MS]
//   --halt-after-commits H: after H committed transactions, begin one more, send its copies, add its offsets,
//     flush, print the summary with "halted": true and halt the JVM mid-transaction (a crash). A second TxnCopy with
//     the same transactional id and group then fences the first (initTransactions aborts its open transaction) and
//     finishes from the group's committed offsets: the output holds every input record exactly once.
// Prints one JSON line: {"copied": N, "committed": C, "aborted": A, "halted": bool}. Exit code 0 when the input was
// copied (or the halt point reached) before the timeout, 1 otherwise.
package mala.it;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class TxnCopy {
  public static void main(String[] args) {
    Args a = new Args(args);
    String bootstrap = a.required("--bootstrap");
    String input = a.required("--input");
    String output = a.required("--output");
    String group = a.required("--group");
    String txnId = a.required("--transactional-id");
    int abortEvery = Integer.parseInt(a.get("--abort-every", "0"));
    String maxPoll = a.get("--max-poll-records", "50");
    int haltAfter = Integer.parseInt(a.get("--halt-after-commits", "-1"));
    long timeoutMs = Long.parseLong(a.get("--timeout-ms", "60000"));
    long deadline = System.currentTimeMillis() + timeoutMs;

    Properties cprops = new Properties();
    cprops.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    cprops.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    cprops.put(ConsumerConfig.CLIENT_ID_CONFIG, "mala-it-txn-copy");
    cprops.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    cprops.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    cprops.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    cprops.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    cprops.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    cprops.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPoll);
    cprops.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
    // A restarted copier rejoins once the crashed member's session expired: 10 s rather than the default 45 s.
    cprops.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
    cprops.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
    cprops.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    cprops.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");

    int copied = 0;
    int committed = 0;
    int aborted = 0;
    int transactions = 0;
    int exit = 0;
    KafkaProducer<String, String> producer = new KafkaProducer<>(TxnProduce.producerProps(bootstrap, txnId));
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cprops)) {
      producer.initTransactions();
      List<TopicPartition> inputs = new ArrayList<>();
      for (PartitionInfo p : consumer.partitionsFor(input, Duration.ofMillis(timeoutMs))) {
        inputs.add(new TopicPartition(input, p.partition()));
      }
      Map<TopicPartition, Long> ends = consumer.endOffsets(inputs, Duration.ofMillis(timeoutMs));
      consumer.subscribe(List.of(input));
      boolean done = false;
      while (!done) {
        if (System.currentTimeMillis() > deadline) throw new IllegalStateException("timed out, copied " + copied);
        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
        if (batch.isEmpty()) {
          done = caughtUp(consumer, ends);
          continue;
        }
        boolean halt = haltAfter >= 0 && committed == haltAfter;
        producer.beginTransaction();
        transactions++;
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> r : batch) {
          producer.send(new ProducerRecord<>(output, r.partition(), r.key(), "copy:" + r.value()));
          offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
        if (halt) {
          producer.flush();
          System.out.println(summary(copied, committed, aborted, true));
          System.out.flush();
          Runtime.getRuntime().halt(0); // mid-transaction: no commit, no abort, no close
        }
        if (abortEvery > 0 && transactions % abortEvery == 0) {
          producer.abortTransaction();
          aborted++;
          rewind(consumer);
        } else {
          producer.commitTransaction();
          committed++;
          copied += batch.count();
          done = caughtUp(consumer, ends);
        }
      }
      producer.close();
    } catch (Exception e) {
      e.printStackTrace();
      producer.close(Duration.ofSeconds(5));
      exit = 1;
    }
    System.out.println(summary(copied, committed, aborted, false));
    System.out.flush();
    System.exit(exit);
  }

  /** After an abort: every assigned partition back to the group's committed offset (its start when none). */
  private static void rewind(KafkaConsumer<String, String> consumer) {
    Set<TopicPartition> assigned = consumer.assignment();
    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
    for (TopicPartition tp : assigned) {
      OffsetAndMetadata o = committed.get(tp);
      if (o == null) consumer.seekToBeginning(List.of(tp));
      else consumer.seek(tp, o.offset());
    }
  }

  /** Every input partition is assigned to this member and its position reached the end offset taken at start. */
  private static boolean caughtUp(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> ends) {
    if (!consumer.assignment().containsAll(ends.keySet())) return false;
    for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
      if (consumer.position(e.getKey(), Duration.ofSeconds(10)) < e.getValue()) return false;
    }
    return true;
  }

  private static String summary(int copied, int committed, int aborted, boolean halted) {
    return "{\"copied\":" + copied + ",\"committed\":" + committed + ",\"aborted\":" + aborted + ",\"halted\":"
        + halted + "}";
  }
}
