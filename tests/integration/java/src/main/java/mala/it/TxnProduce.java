// A transactional producer (Apache Kafka's Java producer with transactional.id): initTransactions(), then N
// transactions of M records each, record i of a transaction sent to partition i % P explicitly so every transaction
// spans several partitions; transaction t (0-based) is aborted when --abort-every K > 0 and t % K == K - 1, else
// committed. Record i of transaction t: key "<tag>-<t>", value "<tag>:<t>:<i>:<M>", so a checker reading the topic
// can tell every record's transaction and whether that transaction arrived whole.
//
// usage: TxnProduce --bootstrap B --topic T --transactional-id ID --transactions N --records M
//                   [--partitions P] [--abort-every K] [--tag TAG] [--leave-open true] [--pause-ms MS]
//                   [--prop name=value]...
//   --pause-ms: a pause between two transactions (the run then spans the faults a test injects).
//   --partitions: how many partitions (0..P-1) the records go to (default: every partition of the topic).
//   --leave-open true: after the N transactions, begin one more (number N), send its M records, flush them (they are
//     in the log, the transaction is open), print the summary with "open": N and halt the JVM without committing,
//     aborting or closing: the transaction is left to the coordinator's transaction.timeout.ms.
// Prints one JSON line: {"transactional_id": ID, "tag": TAG, "records_per_txn": M, "partitions": P,
//   "committed": [t...], "aborted": [t...], "open": t|null}. Exit code 0 when every transaction ended as planned, 1
//   otherwise: the exception goes to stderr, the summary gets "error": <its class> and "uncertain": <the transaction
//   in progress, whose outcome the producer does not know: absent, or present whole>, and the program stops.
package mala.it;

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnProduce {
  public static void main(String[] args) {
    Args a = new Args(args);
    String bootstrap = a.required("--bootstrap");
    String topic = a.required("--topic");
    String txnId = a.required("--transactional-id");
    int transactions = Integer.parseInt(a.required("--transactions"));
    int records = Integer.parseInt(a.required("--records"));
    int partitions = Integer.parseInt(a.get("--partitions", "-1"));
    int abortEvery = Integer.parseInt(a.get("--abort-every", "0"));
    String tag = a.get("--tag", txnId);
    boolean leaveOpen = Boolean.parseBoolean(a.get("--leave-open", "false"));
    long pauseMs = Long.parseLong(a.get("--pause-ms", "0"));

    Properties props = producerProps(bootstrap, txnId);
    for (String p : a.all("--prop")) {
      int eq = p.indexOf('=');
      if (eq <= 0) Args.usage("bad --prop " + p);
      props.put(p.substring(0, eq), p.substring(eq + 1));
    }
    List<Integer> committed = new ArrayList<>();
    List<Integer> aborted = new ArrayList<>();
    int current = -1;
    KafkaProducer<String, String> producer = new KafkaProducer<>(props);
    try {
      if (partitions <= 0) partitions = producer.partitionsFor(topic).size();
      producer.initTransactions();
      for (int t = 0; t < transactions; t++) {
        if (pauseMs > 0 && t > 0) Thread.sleep(pauseMs);
        current = t;
        producer.beginTransaction();
        sendTransaction(producer, topic, tag, t, records, partitions);
        if (abortEvery > 0 && t % abortEvery == abortEvery - 1) {
          producer.flush(); // the records are in the log before the abort marker follows them
          producer.abortTransaction();
          aborted.add(t);
        } else {
          producer.commitTransaction();
          committed.add(t);
        }
        current = -1;
      }
      if (leaveOpen) {
        producer.beginTransaction();
        sendTransaction(producer, topic, tag, transactions, records, partitions);
        producer.flush();
        System.out.println(summary(txnId, tag, records, partitions, committed, aborted, transactions));
        System.out.flush();
        Runtime.getRuntime().halt(0); // no commit, no abort, no close: the transaction stays open
      }
      producer.close();
      System.out.println(summary(txnId, tag, records, partitions, committed, aborted, null));
    } catch (Exception e) {
      e.printStackTrace();
      System.out.println(summary(txnId, tag, records, partitions, committed, aborted, null)
          .replaceFirst("\\}$", ",\"error\":" + Json.str(e.getClass().getName()) + ",\"uncertain\":"
              + (current < 0 ? "null" : current) + "}"));
      System.out.flush();
      producer.close(java.time.Duration.ofSeconds(5));
      System.exit(1);
    }
  }

  static Properties producerProps(String bootstrap, String txnId) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "mala-it-txn-producer");
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
    props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
    props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    return props;
  }

  /** Transaction t's M records, record i to partition i % P. */
  static void sendTransaction(KafkaProducer<String, String> producer, String topic, String tag, int t, int records,
                              int partitions) {
    for (int i = 0; i < records; i++) {
      producer.send(new ProducerRecord<>(topic, i % partitions, tag + "-" + t, tag + ":" + t + ":" + i + ":" + records));
    }
  }

  static String summary(String txnId, String tag, int records, int partitions, List<Integer> committed,
                        List<Integer> aborted, Integer open) {
    return "{\"transactional_id\":" + Json.str(txnId) + ",\"tag\":" + Json.str(tag) + ",\"records_per_txn\":" + records
        + ",\"partitions\":" + partitions + ",\"committed\":" + committed.toString().replace(" ", "")
        + ",\"aborted\":" + aborted.toString().replace(" ", "") + ",\"open\":" + open + "}";
  }
}
