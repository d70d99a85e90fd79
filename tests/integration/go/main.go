// mala-go-client: drives a Kafka-compatible broker with two Go clients, franz-go (kgo + kadm) and sarama, for the
// integration tests (tests/integration/test_produce_consume.py, test_topic_admin.py). Every command prints JSON,
// one object per line, on stdout; diagnostics go to stderr. Exit code 0 on success, 1 on a client error, 2 on a
// usage error. Every command is bounded by --timeout.
//
//	mala-go-client franz|sarama produce --bootstrap B --topic T --count N [--key-prefix K] [--value-prefix V]
//	        [--partition P] [--compression none|gzip|snappy|lz4|zstd] [--acks all|1|0] [--auto-create]
//	    one line per record: {"partition":P,"offset":O,"key":K,"value":V}
//	mala-go-client franz|sarama consume --bootstrap B --topic T --partition P --offset O --count N
//	    one line per record: {"partition":P,"offset":O,"key":K,"value":V}; O = -2 earliest, -1 latest
//	mala-go-client franz|sarama admin create --topic T --partitions N [--replication-factor R] [--config k=v]...
//	mala-go-client franz|sarama admin list | describe --topic T | delete --topic T
//	mala-go-client franz|sarama admin add-partitions --topic T --partitions TOTAL
//	mala-go-client franz|sarama admin describe-configs --topic T | alter-configs --topic T --config k=v...
//	mala-go-client franz|sarama admin offsets --topic T | delete-records --topic T --partition P --offset O
//	mala-go-client franz group-consume --bootstrap B --topic T --group G --count N [--group-protocol classic|consumer]
//	        [--commit]
//	    one line per record as consume; joins the group, reads N records, commits them with --commit, leaves
//	mala-go-client franz txn-produce --bootstrap B --topic T --transactional-id ID --transactions N --records M
//	        --partitions P [--abort-every K] [--tag TAG]
//	    one summary line, as the Java TxnProduce prints (franz_txn.go)
//	mala-go-client franz txn-copy --bootstrap B --topic IN --output OUT --group G --transactional-id ID --count N
//	        [--abort-every K] [--max-poll-records R]
//	    GroupTransactSession consume-transform-produce; one summary line {"copied","committed","aborted"}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// options holds every flag of every command; each command reads the ones it needs.
type options struct {
	tlsCA             string
	tlsCert           string
	tlsKey            string
	saslMechanism     string
	saslUser          string
	saslPassword      string
	bootstrap         string
	topic             string
	count             int
	keyPrefix         string
	valuePrefix       string
	partition         int
	offset            int64
	compression       string
	acks              string
	autoCreate        bool
	partitions        int
	replicationFactor int
	configs           multiFlag
	deletes           multiFlag
	timeout           time.Duration
	group             string
	groupProtocol     string
	commit            bool
	transactionalID   string
	transactions      int
	records           int
	abortEvery        int
	tag               string
	output            string
	maxPollRecords    int
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// record is what produce and consume print for each record.
type record struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
}

// topicError is the per-topic result of create / delete / add-partitions / alter-configs.
type topicError struct {
	Topic     string  `json:"topic"`
	Error     *string `json:"error"`
	ErrorCode int16   `json:"error_code"`
}

type partitionInfo struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Error       *string `json:"error"`
}

type topicInfo struct {
	Topic      string          `json:"topic"`
	ID         string          `json:"id,omitempty"`
	Error      *string         `json:"error"`
	Partitions []partitionInfo `json:"partitions"`
}

type configValue struct {
	Value  *string `json:"value"`
	Source string  `json:"source"`
}

type configsInfo struct {
	Resource string                 `json:"resource"`
	Error    *string                `json:"error"`
	Configs  map[string]configValue `json:"configs"`
}

type offsetsInfo struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

type deleteRecordsInfo struct {
	Partition    int32   `json:"partition"`
	LowWatermark int64   `json:"low_watermark"`
	Error        *string `json:"error"`
	ErrorCode    int16   `json:"error_code"`
}

// client is what each library implements.
type client interface {
	produce(ctx context.Context, o *options) ([]record, error)
	consume(ctx context.Context, o *options, emit func(record)) error
	create(ctx context.Context, o *options) (topicError, error)
	list(ctx context.Context, o *options) (map[string]int, error)
	describe(ctx context.Context, o *options) (topicInfo, error)
	deleteTopic(ctx context.Context, o *options) (topicError, error)
	addPartitions(ctx context.Context, o *options) (topicError, error)
	describeConfigs(ctx context.Context, o *options) (configsInfo, error)
	alterConfigs(ctx context.Context, o *options) (topicError, error)
	offsets(ctx context.Context, o *options) ([]offsetsInfo, error)
	deleteRecords(ctx context.Context, o *options) (deleteRecordsInfo, error)
	close()
}

func usage(msg string) {
	fmt.Fprintln(os.Stderr, "mala-go-client:", msg)
	fmt.Fprintln(os.Stderr, "usage: mala-go-client franz|sarama produce|consume|admin <sub> [flags] (see main.go)")
	os.Exit(2)
}

func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mala-go-client: json:", err)
		os.Exit(1)
	}
	fmt.Println(string(b))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mala-go-client:", err)
	os.Exit(1)
}

func strPtr(s string) *string { return &s }

func errString(err error) *string {
	if err == nil {
		return nil
	}
	return strPtr(err.Error())
}

// keyAt / valueAt: record i's key (nil when no prefix is given, so the partitioner spreads keyless records) and value.
func keyAt(o *options, i int) *string {
	if o.keyPrefix == "" {
		return nil
	}
	return strPtr(fmt.Sprintf("%s%d", o.keyPrefix, i))
}

func valueAt(o *options, i int) string { return fmt.Sprintf("%s%d", o.valuePrefix, i) }

// parseConfigs splits --config k=v flags.
func parseConfigs(o *options) (map[string]string, error) {
	out := map[string]string{}
	for _, c := range o.configs {
		k, v, ok := strings.Cut(c, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("bad --config %q (want key=value)", c)
		}
		out[k] = v
	}
	return out, nil
}

func main() {
	if len(os.Args) < 3 {
		usage("missing arguments")
	}
	lib, cmd, rest := os.Args[1], os.Args[2], os.Args[3:]
	sub := ""
	if cmd == "admin" {
		if len(rest) < 1 {
			usage("admin needs a subcommand")
		}
		sub, rest = rest[0], rest[1:]
	}

	o := &options{}
	fs := flag.NewFlagSet("mala-go-client", flag.ExitOnError)
	fs.StringVar(&o.bootstrap, "bootstrap", "", "bootstrap servers (host:port[,host:port])")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.IntVar(&o.count, "count", 1, "records to produce / consume")
	fs.StringVar(&o.keyPrefix, "key-prefix", "", "record i gets key <prefix><i> (no key when empty)")
	fs.StringVar(&o.valuePrefix, "value-prefix", "value-", "record i gets value <prefix><i>")
	fs.IntVar(&o.partition, "partition", -1, "partition (produce: -1 = the client's partitioner)")
	fs.Int64Var(&o.offset, "offset", -2, "consume / delete-records offset (consume: -2 earliest, -1 latest)")
	fs.StringVar(&o.compression, "compression", "none", "none|gzip|snappy|lz4|zstd")
	fs.StringVar(&o.acks, "acks", "all", "all|1|0")
	fs.BoolVar(&o.autoCreate, "auto-create", false, "let metadata requests create the topic")
	fs.IntVar(&o.partitions, "partitions", 1, "create: partitions; add-partitions: new total")
	fs.IntVar(&o.replicationFactor, "replication-factor", 1, "create: replication factor")
	fs.Var(&o.configs, "config", "key=value (repeatable)")
	fs.Var(&o.deletes, "delete-config", "config key to delete (alter-configs, repeatable)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "overall deadline")
	fs.StringVar(&o.group, "group", "", "group-consume: the consumer group")
	fs.StringVar(&o.groupProtocol, "group-protocol", "classic", "group-consume: classic|consumer (KIP-848)")
	fs.BoolVar(&o.commit, "commit", false, "group-consume: commit what was read before leaving")
	fs.StringVar(&o.transactionalID, "transactional-id", "", "txn-produce / txn-copy: the transactional id")
	fs.IntVar(&o.transactions, "transactions", 1, "txn-produce: transactions")
	fs.IntVar(&o.records, "records", 1, "txn-produce: records per transaction")
	fs.IntVar(&o.abortEvery, "abort-every", 0, "txn-produce / txn-copy: abort every K-th transaction (0: none)")
	fs.StringVar(&o.tag, "tag", "", "txn-produce: the records' tag (default: the transactional id)")
	fs.StringVar(&o.output, "output", "", "txn-copy: the output topic")
	fs.IntVar(&o.maxPollRecords, "max-poll-records", 50, "txn-copy: records per poll (one transaction each)")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "franz: TLS to the brokers, trusting this PEM CA file (plaintext when empty)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "franz: the client certificate (PEM) presented over TLS")
	fs.StringVar(&o.tlsKey, "tls-key", "", "franz: the client certificate's key (PEM)")
	fs.StringVar(&o.saslMechanism, "sasl-mechanism", "", "franz: SASL mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 (none when empty)")
	fs.StringVar(&o.saslUser, "sasl-user", "", "franz: SASL user name")
	fs.StringVar(&o.saslPassword, "sasl-password", "", "franz: SASL password")
	if err := fs.Parse(rest); err != nil {
		usage(err.Error())
	}
	if o.bootstrap == "" {
		usage("--bootstrap is required")
	}
	needsTopic := cmd != "admin" || sub != "list"
	if needsTopic && o.topic == "" {
		usage("--topic is required")
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	if cmd == "group-consume" {
		if lib != "franz" {
			usage("group-consume is a franz command")
		}
		if err := franzGroupConsume(ctx, o, func(r record) { printJSON(r) }); err != nil {
			fail(err)
		}
		return
	}

	if cmd == "txn-produce" || cmd == "txn-copy" {
		if lib != "franz" {
			usage(cmd + " is a franz command")
		}
		if o.transactionalID == "" {
			usage("--transactional-id is required")
		}
		var v any
		var err error
		if cmd == "txn-produce" {
			v, err = franzTxnProduce(ctx, o)
		} else {
			v, err = franzTxnCopy(ctx, o)
		}
		printJSON(v)
		if err != nil {
			fail(err)
		}
		return
	}

	var c client
	var err error
	switch lib {
	case "franz":
		c, err = newFranz(o)
	case "sarama":
		c, err = newSarama(o)
	default:
		usage("unknown library " + lib)
	}
	if err != nil {
		fail(err)
	}
	defer c.close()

	if err := run(ctx, c, cmd, sub, o); err != nil {
		c.close()
		fail(err)
	}
}

func run(ctx context.Context, c client, cmd, sub string, o *options) error {
	switch cmd {
	case "produce":
		recs, err := c.produce(ctx, o)
		for _, r := range recs {
			printJSON(r)
		}
		return err
	case "consume":
		got := 0
		err := c.consume(ctx, o, func(r record) { got++; printJSON(r) })
		if err == nil && got < o.count {
			err = fmt.Errorf("consumed %d of %d records before the deadline", got, o.count)
		}
		return err
	case "admin":
		switch sub {
		case "create":
			r, err := c.create(ctx, o)
			if err == nil {
				printJSON(r)
			}
			return err
		case "list":
			topics, err := c.list(ctx, o)
			if err == nil {
				printJSON(map[string]any{"topics": topics})
			}
			return err
		case "describe":
			t, err := c.describe(ctx, o)
			if err == nil {
				sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
				printJSON(t)
			}
			return err
		case "delete":
			r, err := c.deleteTopic(ctx, o)
			if err == nil {
				printJSON(r)
			}
			return err
		case "add-partitions":
			r, err := c.addPartitions(ctx, o)
			if err == nil {
				printJSON(r)
			}
			return err
		case "describe-configs":
			r, err := c.describeConfigs(ctx, o)
			if err == nil {
				printJSON(r)
			}
			return err
		case "alter-configs":
			r, err := c.alterConfigs(ctx, o)
			if err == nil {
				printJSON(r)
			}
			return err
		case "offsets":
			r, err := c.offsets(ctx, o)
			if err == nil {
				sort.Slice(r, func(i, j int) bool { return r[i].Partition < r[j].Partition })
				for _, p := range r {
					printJSON(p)
				}
			}
			return err
		case "delete-records":
			r, err := c.deleteRecords(ctx, o)
			if err == nil {
				printJSON(r)
			}
			return err
		}
		usage("unknown admin subcommand " + sub)
	}
	usage("unknown command " + cmd)
	return errors.New("unreachable")
}
