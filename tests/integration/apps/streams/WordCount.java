// Kafka Streams word count with a RocksDB state store and processing.guarantee=exactly_once_v2 (issue 22): lines of
// --input are split into words, grouped by word (a repartition topic), counted in the persistent store "counts"
// (changelogged to Kafka), and every count update is written to --output as key = word, value = the count in
// decimal. The record cache is off (statestore.cache.max.bytes=0), so each word occurrence yields exactly one output
// record: under exactly-once, a read_committed reader of --output sees, for each word, the values 1, 2, ..., n in
// order, with no repeat and no gap, even when the application or a broker crashed in between.
//
// usage: WordCount --bootstrap B --input IN --output OUT --application-id ID --state-dir DIR
//                  [--replication-factor R] [--commit-interval-ms MS] [--processing-guarantee G]
//   --processing-guarantee: exactly_once_v2 (default); at_least_once only to see that the tests' checks catch the
//   repeats a crash causes without transactions.
// Runs until SIGTERM/SIGINT (closes the streams client) or SIGKILL. Prints one JSON line per state change:
// {"state": "RUNNING"} ...; exit code 0 after a clean close, 1 when the client reached ERROR.
package mala.it.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public final class WordCount {
  public static void main(String[] args) throws InterruptedException {
    if (args.length % 2 != 0) usage("every flag needs a value");
    Properties flags = new Properties();
    for (int i = 0; i < args.length; i += 2) flags.put(args[i], args[i + 1]);
    String input = required(flags, "--input");
    String output = required(flags, "--output");

    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, required(flags, "--bootstrap"));
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, required(flags, "--application-id"));
    props.put(StreamsConfig.STATE_DIR_CONFIG, required(flags, "--state-dir"));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
        flags.getProperty("--processing-guarantee", StreamsConfig.EXACTLY_ONCE_V2));
    props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, flags.getProperty("--replication-factor", "1"));
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, flags.getProperty("--commit-interval-ms", "200"));
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
    props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
    props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);

    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
        .filter((key, word) -> !word.isEmpty())
        .map((key, word) -> KeyValue.pair(word, word))
        .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()))
        .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
        .toStream()
        .mapValues(count -> Long.toString(count))
        .to(output, Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    boolean[] failed = {false};
    streams.setStateListener((now, before) -> {
      System.out.println("{\"state\":\"" + now + "\"}");
      System.out.flush();
      if (now == KafkaStreams.State.ERROR) failed[0] = true;
      if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) stopped.countDown();
    });
    streams.setUncaughtExceptionHandler(e -> {
      e.printStackTrace();
      return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
          .SHUTDOWN_CLIENT;
    });
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close(Duration.ofSeconds(30));
      stopped.countDown();
    }));
    streams.start();
    stopped.await();
    streams.close(Duration.ofSeconds(30));
    System.exit(failed[0] ? 1 : 0);
  }

  private static String required(Properties flags, String name) {
    String v = flags.getProperty(name);
    if (v == null) usage(name + " is required");
    return v;
  }

  private static void usage(String msg) {
    System.err.println("usage error: " + msg);
    System.exit(2);
  }
}
