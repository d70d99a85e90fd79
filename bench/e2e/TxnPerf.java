// Transactions with Apache Kafka's Java producer and consumer, for bench/e2e/compare_txn.py (issue 22).
//
//   TxnPerf produce BOOTSTRAP TOPIC RECORDS RECORD_SIZE TXN_RECORDS
//     One transactional producer (a new transactional.id) writes RECORDS records of RECORD_SIZE bytes, committing
//     a transaction after every TXN_RECORDS records (beginTransaction, send x TXN_RECORDS, commitTransaction), keys
//     null, so the client's default partitioner spreads them over the topic's partitions. Producer settings are the
//     client's defaults apart from the transactional id (acks=all and idempotence are what transactions need).
//     Prints one line "records=N bytes=B transactions=T seconds=S" (S from the first beginTransaction() to the
//     return of the last commitTransaction(); initTransactions() and the JVM's start are not counted).
//
//   TxnPerf latency BOOTSTRAP TOPIC TXN_PER_SEC SECONDS TXN_RECORDS RECORD_SIZE WARMUP_SECONDS
//     A read_committed consumer (assign() of every partition, positioned at the end before the producer starts)
//     and a transactional producer in this JVM. The producer starts a transaction every 1/TXN_PER_SEC seconds
//     (fixed schedule; a commit that takes longer than the interval delays the next transactions), sends
//     TXN_RECORDS records whose first 8 bytes are the transaction's scheduled start (System.nanoTime() clock), and
//     commits. The consumer computes, for every record, the time from that scheduled start to the moment poll()
//     handed it over: a transaction that starts late because earlier commits were slow counts its delay (no
//     coordinated omission). Records of the first WARMUP_SECONDS are read but not counted; the schedule restarts
//     after them. linger.ms 0 (as compare.py's latency runs); the consumer keeps the client's defaults
//     (fetch.min.bytes 1, fetch.max.wait.ms 500).
//     Prints "sent=N received=M transactions=T seconds=S p50_ms=.. p99_ms=.. p999_ms=.. max_ms=.." (and the
//     producer's side alone: commit_p50_ms/commit_p99_ms/commit_max_ms, scheduled start to commitTransaction()'s
//     return, per transaction) and exits 1
//     when a counted record that was committed did not arrive within 30 s of the last commit, or arrived twice.
//
// Compiled and run by bench/e2e/compare_txn.py (javac against kafka-clients; not part of the CMake build).
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnPerf {
  private static KafkaProducer<byte[], byte[]> producer(String bootstrap, String tag, Properties extra) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "mala-bench-" + tag + "-" + UUID.randomUUID());
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "mala-bench-txn-" + tag);
    props.putAll(extra);
    KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props);
    p.initTransactions();
    return p;
  }

  private static int produce(String[] a) throws Exception {
    String bootstrap = a[1];
    String topic = a[2];
    long records = Long.parseLong(a[3]);
    int size = Integer.parseInt(a[4]);
    long perTxn = Long.parseLong(a[5]);
    byte[] value = new byte[size];
    Arrays.fill(value, (byte) 'x');
    long sent = 0;
    long txns = 0;
    try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, "produce", new Properties())) {
      long start = System.nanoTime();
      while (sent < records) {
        p.beginTransaction();
        long n = Math.min(perTxn, records - sent);
        for (long i = 0; i < n; i++) p.send(new ProducerRecord<>(topic, null, value));
        p.commitTransaction(); // throws when a send of the transaction failed
        sent += n;
        txns++;
      }
      double seconds = (System.nanoTime() - start) / 1e9;
      System.out.printf("records=%d bytes=%d transactions=%d seconds=%.6f%n", sent, sent * size, txns, seconds);
    }
    return 0;
  }

  private static double percentile(long[] sorted, double q) {
    if (sorted.length == 0) return Double.NaN;
    int i = (int) Math.ceil(q * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, i))] / 1e6;
  }

  private static int latency(String[] a) throws Exception {
    String bootstrap = a[1];
    String topic = a[2];
    double rate = Double.parseDouble(a[3]);
    double seconds = Double.parseDouble(a[4]);
    int perTxn = Integer.parseInt(a[5]);
    int size = Math.max(16, Integer.parseInt(a[6])); // send time and sequence number
    double warmup = Double.parseDouble(a[7]);

    Properties cprops = new Properties();
    cprops.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    cprops.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    cprops.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    cprops.put(ConsumerConfig.CLIENT_ID_CONFIG, "mala-bench-txn-latency-consumer");
    cprops.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    cprops.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");

    long total = (long) Math.ceil(rate * seconds) * perTxn;
    long[] lat = new long[(int) total];
    AtomicLong counted = new AtomicLong();
    AtomicLong received = new AtomicLong();
    AtomicLong duplicates = new AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    boolean[] seen = new boolean[(int) total];
    Throwable[] consumerError = new Throwable[1];

    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cprops);
    List<TopicPartition> tps = new ArrayList<>();
    for (PartitionInfo pi : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
      tps.add(new TopicPartition(topic, pi.partition()));
    }
    consumer.assign(tps);
    consumer.seekToEnd(tps);
    for (TopicPartition tp : tps) consumer.position(tp); // resolve the end offsets now, before anything is sent

    Thread reader = new Thread(() -> {
      try {
        while (!stop.get()) {
          ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(50));
          long now = System.nanoTime();
          for (ConsumerRecord<byte[], byte[]> r : batch) {
            received.incrementAndGet();
            ByteBuffer v = ByteBuffer.wrap(r.value());
            long sentAt = v.getLong(0);
            long seq = v.getLong(8);
            if (seq < 0 || seq >= total) continue; // a warm-up record
            if (seen[(int) seq]) {
              duplicates.incrementAndGet();
              continue;
            }
            seen[(int) seq] = true;
            lat[(int) counted.getAndIncrement()] = now - sentAt;
          }
        }
      } catch (Throwable t) {
        consumerError[0] = t;
      } finally {
        consumer.close();
      }
    }, "read-committed-consumer");
    reader.start();

    Properties pprops = new Properties();
    pprops.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    long warmTxns = (long) Math.ceil(rate * warmup);
    long txns = (long) Math.ceil(rate * seconds);
    long[] commitLat = new long[(int) txns]; // scheduled start to commitTransaction()'s return, per transaction
    long countedSent = 0;
    long sentTotal = 0;
    double measuredSeconds;
    try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, "latency", pprops)) {
      long intervalNs = (long) (1e9 / rate);
      long begin = System.nanoTime();
      long measuredStart = 0;
      for (long t = 0; t < warmTxns + txns; t++) {
        boolean counting = t >= warmTxns;
        if (t == warmTxns) begin = measuredStart = System.nanoTime(); // a late warm-up does not carry over
        long due = begin + (counting ? t - warmTxns : t) * intervalNs;
        long wait;
        while ((wait = due - System.nanoTime()) > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
        p.beginTransaction();
        for (int i = 0; i < perTxn; i++) {
          ByteBuffer v = ByteBuffer.allocate(size);
          long seq = counting ? countedSent++ : -1;
          v.putLong(0, due); // the scheduled time: a transaction that starts late counts its delay
          v.putLong(8, seq);
          p.send(new ProducerRecord<>(topic, null, v.array()));
          sentTotal++;
        }
        p.commitTransaction();
        if (counting) commitLat[(int) (t - warmTxns)] = System.nanoTime() - due;
      }
      measuredSeconds = (System.nanoTime() - measuredStart) / 1e9;
    }
    long deadline = System.currentTimeMillis() + 30_000;
    while (counted.get() < countedSent && System.currentTimeMillis() < deadline && consumerError[0] == null) {
      Thread.sleep(10);
    }
    stop.set(true);
    reader.join(10_000);
    int n = (int) counted.get();
    long[] sorted = Arrays.copyOf(lat, n);
    Arrays.sort(sorted);
    Arrays.sort(commitLat);
    System.out.printf("sent=%d received=%d transactions=%d seconds=%.6f counted_sent=%d counted=%d duplicates=%d "
            + "p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f commit_p50_ms=%.3f commit_p99_ms=%.3f "
            + "commit_max_ms=%.3f%n",
        sentTotal, received.get(), txns, measuredSeconds, countedSent, n, duplicates.get(),
        percentile(sorted, 0.50), percentile(sorted, 0.99), percentile(sorted, 0.999), percentile(sorted, 1.0),
        percentile(commitLat, 0.50), percentile(commitLat, 0.99), percentile(commitLat, 1.0));
    if (consumerError[0] != null) {
      consumerError[0].printStackTrace();
      return 1;
    }
    if (n != countedSent || duplicates.get() != 0) {
      System.err.printf("TxnPerf latency: %d of %d committed records read, %d duplicates%n", n, countedSent,
          duplicates.get());
      return 1;
    }
    return 0;
  }

  public static void main(String[] args) {
    int exit;
    try {
      if (args.length == 6 && args[0].equals("produce")) {
        exit = produce(args);
      } else if (args.length == 8 && args[0].equals("latency")) {
        exit = latency(args);
      } else {
        System.err.println("usage: TxnPerf produce BOOTSTRAP TOPIC RECORDS RECORD_SIZE TXN_RECORDS\n"
            + "       TxnPerf latency BOOTSTRAP TOPIC TXN_PER_SEC SECONDS TXN_RECORDS RECORD_SIZE WARMUP_SECONDS");
        exit = 2;
      }
    } catch (Exception e) {
      e.printStackTrace();
      exit = 1;
    }
    System.out.flush();
    System.exit(exit);
  }
}
