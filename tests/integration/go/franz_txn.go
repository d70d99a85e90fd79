// Transactions with franz-go (issue 22): a transactional producer (txn-produce) and a consume-transform-produce loop
// on kgo.GroupTransactSession (txn-copy), the record shapes of the Java TxnProduce / TxnCopy programs so the same
// checkers judge them.
package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnSummary is what txn-produce prints (the fields of the Java TxnProduce summary).
type txnSummary struct {
	TransactionalID string `json:"transactional_id"`
	Tag             string `json:"tag"`
	RecordsPerTxn   int    `json:"records_per_txn"`
	Partitions      int    `json:"partitions"`
	Committed       []int  `json:"committed"`
	Aborted         []int  `json:"aborted"`
	Open            *int   `json:"open"`
}

// franzTxnProduce: --transactions N transactions of --records M records; record i of transaction t has key
// "<tag>-<t>", value "<tag>:<t>:<i>:<M>" and goes to partition i % --partitions; transaction t is aborted when
// --abort-every K > 0 and t % K == K-1, else committed.
func franzTxnProduce(ctx context.Context, o *options) (txnSummary, error) {
	tag := o.tag
	if tag == "" {
		tag = o.transactionalID
	}
	sum := txnSummary{TransactionalID: o.transactionalID, Tag: tag, RecordsPerTxn: o.records,
		Partitions: o.partitions, Committed: []int{}, Aborted: []int{}}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...),
		kgo.TransactionalID(o.transactionalID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(o.topic),
	)
	if err != nil {
		return sum, err
	}
	defer cl.Close()
	for t := 0; t < o.transactions; t++ {
		if err := cl.BeginTransaction(); err != nil {
			return sum, fmt.Errorf("begin %d: %w", t, err)
		}
		recs := make([]*kgo.Record, 0, o.records)
		for i := 0; i < o.records; i++ {
			recs = append(recs, &kgo.Record{
				Partition: int32(i % o.partitions),
				Key:       []byte(fmt.Sprintf("%s-%d", tag, t)),
				Value:     []byte(fmt.Sprintf("%s:%d:%d:%d", tag, t, i, o.records)),
			})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return sum, fmt.Errorf("produce in transaction %d: %w", t, err)
		}
		abort := o.abortEvery > 0 && t%o.abortEvery == o.abortEvery-1
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(!abort)); err != nil {
			return sum, fmt.Errorf("end transaction %d (commit %v): %w", t, !abort, err)
		}
		if abort {
			sum.Aborted = append(sum.Aborted, t)
		} else {
			sum.Committed = append(sum.Committed, t)
		}
	}
	return sum, nil
}

// copySummary is what txn-copy prints.
type copySummary struct {
	Copied    int `json:"copied"`
	Committed int `json:"committed"`
	Aborted   int `json:"aborted"`
}

// franzTxnCopy: a GroupTransactSession (group --group, read_committed, input --topic) copies every record to
// --output (same partition and key, value "copy:<value>"), one transaction per poll, the group's offsets committed
// in the transaction; every --abort-every-th transaction is aborted instead (the session rewinds to the committed
// offsets). Stops once --count records were copied by committed transactions.
func franzTxnCopy(ctx context.Context, o *options) (copySummary, error) {
	var sum copySummary
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...),
		kgo.TransactionalID(o.transactionalID),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(200_000_000),
		kgo.SessionTimeout(6_000_000_000),
		kgo.HeartbeatInterval(500_000_000),
	)
	if err != nil {
		return sum, err
	}
	defer sess.Close()
	transactions := 0
	for sum.Copied < o.count {
		fetches := sess.PollRecords(ctx, o.maxPollRecords)
		if ctx.Err() != nil {
			return sum, fmt.Errorf("copied %d of %d before the deadline", sum.Copied, o.count)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return sum, fmt.Errorf("fetch %s/%d: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return sum, fmt.Errorf("begin: %w", err)
		}
		transactions++
		out := make([]*kgo.Record, 0, len(recs))
		for _, r := range recs {
			out = append(out, &kgo.Record{Topic: o.output, Partition: r.Partition, Key: r.Key,
				Value: append([]byte("copy:"), r.Value...)})
		}
		if err := sess.ProduceSync(ctx, out...).FirstErr(); err != nil {
			return sum, fmt.Errorf("produce: %w", err)
		}
		abort := o.abortEvery > 0 && transactions%o.abortEvery == 0
		committed, err := sess.End(ctx, kgo.TransactionEndTry(!abort))
		if err != nil {
			return sum, fmt.Errorf("end (commit %v): %w", !abort, err)
		}
		if committed {
			sum.Committed++
			sum.Copied += len(recs)
		} else {
			sum.Aborted++
		}
	}
	return sum, nil
}
