// Zombie fencing with two Java producers sharing one transactional.id: the first ("zombie") begins a transaction
// and writes a record (flushed: it is in the log); the second initTransactions() with the same id, which bumps the
// epoch and aborts the zombie's open transaction, then commits a transaction of its own; then the zombie tries to
// commit. Records: key "<tag>", values "<tag>:zombie" and "<tag>:successor".
//
// usage: TxnFence --bootstrap B --topic T --transactional-id ID [--tag TAG] [--partition P]
// Prints one JSON line: {"zombie_error": <class of the exception the zombie's commitTransaction() threw, or null>,
//   "zombie_cause": <class of its cause or null>, "successor_committed": bool}. Exit code 0 when the program ran to
// the end (whatever the zombie saw: the test judges it), 1 when the successor failed.
package mala.it;

import java.time.Duration;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public final class TxnFence {
  public static void main(String[] args) {
    Args a = new Args(args);
    String bootstrap = a.required("--bootstrap");
    String topic = a.required("--topic");
    String txnId = a.required("--transactional-id");
    String tag = a.get("--tag", txnId);
    int partition = Integer.parseInt(a.get("--partition", "0"));

    String zombieError = null;
    String zombieCause = null;
    boolean successorCommitted = false;
    KafkaProducer<String, String> zombie = new KafkaProducer<>(TxnProduce.producerProps(bootstrap, txnId));
    KafkaProducer<String, String> successor = new KafkaProducer<>(TxnProduce.producerProps(bootstrap, txnId));
    int exit = 0;
    try {
      zombie.initTransactions();
      zombie.beginTransaction();
      zombie.send(new ProducerRecord<>(topic, partition, tag, tag + ":zombie")).get();

      successor.initTransactions();
      successor.beginTransaction();
      successor.send(new ProducerRecord<>(topic, partition, tag, tag + ":successor")).get();
      successor.commitTransaction();
      successorCommitted = true;
    } catch (Exception e) {
      e.printStackTrace();
      exit = 1;
    }
    if (successorCommitted) {
      try {
        zombie.commitTransaction();
      } catch (Exception e) {
        zombieError = e.getClass().getName();
        zombieCause = e.getCause() == null ? null : e.getCause().getClass().getName();
        System.err.println("TxnFence: zombie commit failed as expected: " + e);
      }
    }
    zombie.close(Duration.ofSeconds(5));
    successor.close(Duration.ofSeconds(5));
    System.out.println("{\"zombie_error\":" + Json.str(zombieError) + ",\"zombie_cause\":" + Json.str(zombieCause)
        + ",\"successor_committed\":" + successorCommitted + "}");
    System.out.flush();
    System.exit(exit);
  }
}
