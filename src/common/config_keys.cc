// The table of configuration keys Mala knows: Apache Kafka 4.x's names, types, defaults, validators,
// importance and update modes for the broker/controller keys, plus three Mala-specific keys (cluster.id,
// mala.shards, log.level).
#include <algorithm>
#include <string>

#include "mala/common/config.h"

namespace mala {

namespace {

using enum config_type;
using enum config_importance;
using enum config_update_mode;

std::vector<config_key> build_table() {
  // clang-format off
  std::vector<config_key> keys = {
    // --- Roles and identity (KRaft)
    {.name = "node.id", .type = int32, .required = true, .min = 0, .importance = high,
     .doc = "The node id for the roles this process plays; required in KRaft mode."},
    {.name = "process.roles", .type = list, .required = true, .allowed = {"broker", "controller"}, .importance = high,
     .doc = "The roles this process plays: 'broker', 'controller', or 'broker,controller' (combined mode)."},
    {.name = "cluster.id", .type = string, .importance = medium,
     .doc = "Mala: the cluster id (Kafka's 22-character base64 uuid) written when formatting empty log dirs; "
            "a random one when unset. Kafka passes it to `kafka-storage format --cluster-id` instead."},
    {.name = "broker.rack", .type = string, .importance = medium,
     .doc = "Rack of the broker, used for rack-aware replica assignment."},

    // --- Listeners
    {.name = "listeners", .type = list, .default_value = "PLAINTEXT://:9092", .importance = high,
     .update_mode = per_broker,
     .doc = "Comma-separated listeners NAME://host:port; an empty host binds every interface."},
    {.name = "advertised.listeners", .type = list, .importance = high, .update_mode = per_broker,
     .doc = "Listeners published to clients and other brokers when they differ from `listeners`; defaults to "
            "`listeners` without the controller listeners."},
    {.name = "listener.security.protocol.map", .type = string,
     .default_value = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
     .importance = low, .update_mode = per_broker,
     .doc = "Map from listener name to security protocol. When not set explicitly, controller listeners map to "
            "PLAINTEXT (as Kafka does in KRaft mode)."},
    {.name = "inter.broker.listener.name", .type = string, .importance = medium,
     .doc = "Listener used between brokers; defaults to the listener named after security.inter.broker.protocol."},
    {.name = "security.inter.broker.protocol", .type = string, .default_value = "PLAINTEXT",
     .allowed = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, .importance = medium,
     .doc = "Security protocol between brokers; not allowed together with inter.broker.listener.name."},
    {.name = "metrics.listeners", .type = list, .default_value = "", .importance = medium,
     .doc = "Mala: where the metrics and health endpoint listens, as http://host:port (an empty host binds "
            "every interface); empty: no endpoint. Serves /metrics (Prometheus text, Kafka's JMX exporter names), "
            "/health/live and /health/ready."},
    {.name = "controller.listener.names", .type = list, .default_value = "", .importance = high,
     .doc = "Names of the listeners used by the controller; a broker uses the first to reach the quorum."},

    // --- KRaft quorum
    {.name = "controller.quorum.voters", .type = list, .default_value = "", .importance = high,
     .doc = "Static voter set id@host:port,...; all controllers of the quorum."},
    {.name = "controller.quorum.bootstrap.servers", .type = list, .default_value = "", .importance = high,
     .doc = "host:port,... of controllers to discover the quorum from (KIP-853 dynamic quorum)."},
    {.name = "controller.quorum.election.timeout.ms", .type = int32, .default_value = "1000", .importance = high,
     .doc = "Maximum time without fetching from the leader before a new election starts."},
    {.name = "controller.quorum.fetch.timeout.ms", .type = int32, .default_value = "2000", .importance = high,
     .doc = "Maximum time without a successful fetch from the leader before a voter becomes a candidate."},
    {.name = "controller.quorum.election.backoff.max.ms", .type = int32, .default_value = "1000",
     .importance = high, .doc = "Maximum backoff before starting a new election (exponential backoff)."},
    {.name = "broker.heartbeat.interval.ms", .type = int32, .default_value = "2000", .importance = medium,
     .doc = "Milliseconds between broker heartbeats to the controller."},
    {.name = "log.dir.failure.timeout.ms", .type = int64, .default_value = "30000", .min = 1, .importance = low,
     .doc = "If the broker is unable to successfully communicate to the controller that some log directory has "
            "failed for longer than this time, the broker will fail and shut down."},
    {.name = "broker.session.timeout.ms", .type = int32, .default_value = "9000", .importance = medium,
     .doc = "Milliseconds a broker lease lasts without a heartbeat before the broker is fenced."},
    {.name = "metadata.log.dir", .type = string, .importance = high,
     .doc = "This configuration determines where we put the metadata log for clusters in KRaft mode. If it is not "
            "set, the metadata log is placed in the first log directory from log.dirs."},
    {.name = "metadata.log.max.record.bytes.between.snapshots", .type = int64, .default_value = "20971520",
     .min = 1, .importance = high,
     .doc = "Bytes of metadata log records after the latest snapshot that trigger a new snapshot."},
    {.name = "metadata.log.segment.bytes", .type = int32, .default_value = "1073741824", .min = 8 * 1024 * 1024,
     .importance = high, .doc = "The maximum size of a single metadata log file."},
    {.name = "metadata.log.segment.ms", .type = int64, .default_value = "604800000", .min = 1,
     .importance = high,
     .doc = "The maximum time before a new metadata log file is rolled out (in milliseconds)."},

    // --- Network and threads
    {.name = "socket.request.max.bytes", .type = int32, .default_value = "104857600", .min = 1,
     .importance = high, .doc = "The maximum number of bytes in a socket request."},
    {.name = "socket.send.buffer.bytes", .type = int32, .default_value = "102400", .importance = high,
     .doc = "SO_SNDBUF of server sockets; -1 uses the OS default."},
    {.name = "socket.receive.buffer.bytes", .type = int32, .default_value = "102400", .importance = high,
     .doc = "SO_RCVBUF of server sockets; -1 uses the OS default."},
    {.name = "connections.max.idle.ms", .type = int64, .default_value = "600000", .importance = medium,
     .doc = "Idle connections are closed after this many milliseconds."},
    {.name = "connections.max.reauth.ms", .type = int64, .default_value = "0", .importance = medium,
     .doc = "KIP-368: when positive, a SASL session lasts at most this long; the client re-authenticates on the "
            "connection before then, or the connection is closed at its next request."},
    // --- SASL (SASL_PLAINTEXT listeners; listener.name.<listener>.-prefixed overrides are read per listener)
    {.name = "sasl.enabled.mechanisms", .type = list, .default_value = "GSSAPI", .importance = medium,
     .update_mode = per_broker,
     .doc = "SASL mechanisms the SASL listeners accept. Mala serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and "
            "OAUTHBEARER; "
            "GSSAPI (Kafka's default) is refused at start-up when a SASL listener would use it."},
    {.name = "sasl.mechanism.inter.broker.protocol", .type = string, .default_value = "GSSAPI",
     .importance = medium, .update_mode = per_broker,
     .doc = "SASL mechanism between brokers when the inter-broker listener uses SASL; it must be enabled there. "
            "The node presents the username and password options of that listener's login module."},
    {.name = "sasl.mechanism.controller.protocol", .type = string, .default_value = "GSSAPI",
     .importance = medium, .update_mode = read_only,
     .doc = "SASL mechanism the node uses on the controller listener when it uses SASL (Raft, broker "
            "registration and heartbeats, forwarding); PLAIN is supported there. The node presents the username "
            "and password options of that listener's login module."},
    {.name = "sasl.jaas.config", .type = password, .importance = medium, .update_mode = per_broker,
     .doc = "JAAS configuration; Mala reads the PlainLoginModule's user_<name>=\"<password>\" options. "
            "listener.name.<listener>.plain.sasl.jaas.config and listener.name.<listener>.sasl.jaas.config take "
            "precedence."},
    // --- SASL/OAUTHBEARER signed tokens (OAuthBearerValidatorCallbackHandler); also read per listener, as
    // listener.name.<listener>.oauthbearer.<key> or listener.name.<listener>.<key>.
    {.name = "sasl.oauthbearer.jwks.endpoint.url", .type = string, .importance = medium,
     .doc = "The JSON Web Key Set of signed OAUTHBEARER tokens: a file:// URL read at start-up, or an http(s) "
            "URL fetched at start-up and refreshed."},
    {.name = "sasl.oauthbearer.jwks.endpoint.refresh.ms", .type = int64, .default_value = "3600000",
     .importance = low, .doc = "How often the key set of an http(s) URL is fetched again."},
    {.name = "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", .type = int64, .default_value = "100",
     .importance = low, .doc = "First wait after a failed key set fetch; doubled up to the maximum."},
    {.name = "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", .type = int64, .default_value = "10000",
     .importance = low, .doc = "Longest wait between failed key set fetches."},
    {.name = "sasl.oauthbearer.expected.audience", .type = list, .importance = low,
     .doc = "Audiences a signed token's aud claim must name one of."},
    {.name = "sasl.oauthbearer.expected.issuer", .type = string, .importance = low,
     .doc = "The iss a signed token must carry."},
    {.name = "sasl.oauthbearer.clock.skew.seconds", .type = int32, .default_value = "30", .min = 0,
     .importance = low, .doc = "Clock difference allowed on a signed token's exp and nbf."},
    {.name = "sasl.oauthbearer.scope.claim.name", .type = string, .default_value = "scope", .importance = low,
     .doc = "The claim holding a signed token's scope."},
    {.name = "sasl.oauthbearer.sub.claim.name", .type = string, .default_value = "sub", .importance = low,
     .doc = "The claim holding a signed token's principal."},
    // --- The node's own OAUTHBEARER login for its connections to other nodes (Kafka's login callback
    // handlers); also read per listener, as listener.name.<listener>.oauthbearer.<key>.
    {.name = "sasl.login.callback.handler.class", .type = string, .importance = medium,
     .doc = "How the node obtains its OAUTHBEARER token between nodes: unset (Kafka's unsecured login, "
            "unsecuredLogin* options of the OAuthBearerLoginModule) or "
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler "
            "(sasl.oauthbearer.token.endpoint.url)."},
    {.name = "sasl.oauthbearer.token.endpoint.url", .type = string, .importance = medium,
     .doc = "Where OAuthBearerLoginCallbackHandler gets the node's token: a file:// URL of a file holding "
            "the JWT, or an http(s) token endpoint asked with the client credentials grant (the login "
            "module's clientId, clientSecret and scope options)."},
    {.name = "sasl.login.retry.backoff.ms", .type = int64, .default_value = "100", .min = 1, .importance = low,
     .doc = "First wait after a failed token retrieval; doubled up to the maximum."},
    {.name = "sasl.login.retry.backoff.max.ms", .type = int64, .default_value = "10000", .min = 1,
     .importance = low, .doc = "Longest wait between failed token retrievals."},
    {.name = "sasl.login.read.timeout.ms", .type = int32, .min = 1, .importance = low,
     .doc = "How long one request to the token endpoint may take (10 s when unset)."},
    {.name = "sasl.server.max.receive.size", .type = int32, .default_value = "524288", .min = 1,
     .importance = low,
     .doc = "The largest request accepted before and during SASL authentication; a larger one closes the "
            "connection unread."},
    {.name = "queued.max.requests", .type = int32, .default_value = "500", .min = 1, .importance = high,
     .doc = "Mala: per connection, the requests read and not yet answered (the pipeline of a client's "
             "max.in.flight.requests.per.connection); at the bound the connection stops reading until responses "
             "go out (Kafka: the broker-wide request queue)."},
    {.name = "queued.max.request.bytes", .type = int64, .default_value = "16777216", .min = -1,
     .importance = medium,
     .doc = "Mala: per connection, the bytes of requests read and not yet answered; at the bound the connection "
             "stops reading until responses go out. A request alone is always read (socket.request.max.bytes "
             "bounds it), so 0 serves one request at a time; -1: no bound but queued.max.requests (Kafka: the "
             "broker-wide request queue's bytes, default -1)."},
    {.name = "telemetry.max.bytes", .type = int32, .default_value = "1048576", .min = 1, .importance = low,
     .doc = "The maximum size (after compression if compression is used) of telemetry metrics pushed from a "
             "client to the broker (KIP-714; taken only where metrics.listeners is set)."},
    {.name = "quota.window.num", .type = int32, .default_value = "11", .min = 1, .importance = low,
     .doc = "The number of samples to retain in memory for client quotas."},
    {.name = "quota.window.size.seconds", .type = int32, .default_value = "1", .min = 1, .importance = low,
     .doc = "The time span of each sample for client quotas."},
    {.name = "replication.quota.window.num", .type = int32, .default_value = "11", .min = 1,
     .importance = low, .doc = "The number of samples to retain in memory for replication quotas."},
    {.name = "replication.quota.window.size.seconds", .type = int32, .default_value = "1", .min = 1,
     .importance = low, .doc = "The time span of each sample for replication quotas."},
    {.name = "controller.quota.window.num", .type = int32, .default_value = "11", .min = 1, .importance = low,
     .doc = "The number of samples to retain in memory for controller mutation quotas."},
    {.name = "controller.quota.window.size.seconds", .type = int32, .default_value = "1", .min = 1,
     .importance = low, .doc = "The time span of each sample for controller mutations quotas."},
    {.name = "num.network.threads", .type = int32, .default_value = "3", .min = 1, .importance = high,
     .update_mode = cluster_wide,
     .doc = "Threads receiving requests and sending responses (Mala: accepted, unused; see mala.shards)."},
    {.name = "num.io.threads", .type = int32, .default_value = "8", .min = 1, .importance = high,
     .update_mode = cluster_wide, .doc = "Threads processing requests, which may include disk I/O."},
    {.name = "max.incremental.fetch.session.cache.slots", .type = int32, .default_value = "1000", .min = 0,
     .importance = medium,
     .doc = "The maximum number of total incremental fetch sessions that we will maintain (KIP-227)."},
    {.name = "mala.shards", .type = int32, .default_value = "0", .min = 0, .max = 1024, .importance = high,
     .doc = "Mala: number of shard threads (one io_context each); 0 means one per CPU the process may run on "
             "(its CPU affinity: taskset, cpusets)."},
    {.name = "log.level", .type = string, .default_value = "info",
     .allowed = {"trace", "debug", "info", "warn", "error", "critical", "off"}, .importance = low,
     .doc = "Mala: level of every subsystem logger."},

    // --- Topics and logs
    {.name = "log.dirs", .type = list, .importance = high,
     .doc = "Comma-separated directories where log data is stored; log.dir when unset."},
    {.name = "cordoned.log.dirs", .type = list, .default_value = "", .importance = medium,
     .doc = "A comma-separated list of the directories that are cordoned. Entries in this list must be entries in "
             "log.dirs or log.dir configuration. This can also be set to * to cordon all log directories "
             "(KIP-1066: no new replica is placed on a broker whose log dirs are all cordoned)."},
    {.name = "log.dir", .type = string, .default_value = "/tmp/mala-logs", .importance = high,
     .doc = "The directory where log data is kept (supplemental to log.dirs)."},
    {.name = "num.partitions", .type = int32, .default_value = "1", .min = 1, .importance = medium,
     .doc = "The default number of partitions per auto-created topic."},
    {.name = "default.replication.factor", .type = int32, .default_value = "1", .importance = medium,
     .doc = "The replication factor of automatically created topics and of CreateTopics with -1."},
    {.name = "min.insync.replicas", .type = int32, .default_value = "1", .min = 1, .importance = high,
     .update_mode = cluster_wide,
     .doc = "With acks=all, the minimum number of in-sync replicas that must acknowledge a write."},
    // --- Authorization (Kafka's StandardAuthorizer)
    {.name = "authorizer.class.name", .type = string, .default_value = "",
     .allowed = {"", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}, .importance = low,
     .doc = "The authorizer: empty for none (every request allowed, the ACL APIs answer SECURITY_DISABLED), or "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer for ACLs kept in the metadata log. Brokers "
            "and controllers reach each other as User:ANONYMOUS on PLAINTEXT: make their principal a super user "
            "(or grant it CLUSTER_ACTION on the cluster)."},
    {.name = "super.users", .type = string, .default_value = "", .importance = low,
     .doc = "Principals allowed everything whatever the ACLs say, separated by semicolons (User:admin;User:broker)."},
    {.name = "allow.everyone.if.no.acl.found", .type = boolean, .default_value = "false", .importance = low,
     .doc = "Whether a resource no ACL names is open to every principal (otherwise only super users may use it)."},
    {.name = "auto.create.topics.enable", .type = boolean, .default_value = "true", .importance = high,
     .doc = "Create a topic when a client asks for metadata of an unknown one."},
    {.name = "delete.topic.enable", .type = boolean, .default_value = "true", .importance = high,
     .doc = "Allow deleting topics; when false, DeleteTopics fails."},
    {.name = "message.max.bytes", .type = int32, .default_value = "1048588", .min = 0, .importance = high,
     .update_mode = cluster_wide, .doc = "The largest record batch size allowed (topic: max.message.bytes)."},
    {.name = "log.segment.bytes", .type = int32, .default_value = "1073741824", .min = 1048576,
     .importance = high, .update_mode = cluster_wide, .doc = "The maximum size of a single log segment file."},
    {.name = "log.roll.ms", .type = int64, .min = 1, .importance = high, .update_mode = cluster_wide,
     .doc = "Maximum time before a new segment is rolled; log.roll.hours when unset."},
    {.name = "log.roll.hours", .type = int32, .default_value = "168", .min = 1, .importance = high,
     .doc = "Maximum time before a new segment is rolled, in hours; secondary to log.roll.ms."},
    {.name = "log.retention.ms", .type = int64, .importance = high, .update_mode = cluster_wide,
     .doc = "Milliseconds to keep a log segment; -1 means no time limit; log.retention.minutes when unset."},
    {.name = "log.retention.minutes", .type = int32, .importance = high,
     .doc = "Minutes to keep a log segment; secondary to log.retention.ms; log.retention.hours when unset."},
    {.name = "log.retention.hours", .type = int32, .default_value = "168", .importance = high,
     .doc = "Hours to keep a log segment; tertiary to log.retention.ms."},
    {.name = "log.retention.bytes", .type = int64, .default_value = "-1", .importance = high,
     .update_mode = cluster_wide, .doc = "Maximum size of a partition's log before old segments are deleted."},
    {.name = "log.retention.check.interval.ms", .type = int64, .default_value = "300000", .min = 1,
     .importance = medium, .doc = "How often logs are checked for segments eligible for deletion."},
    {.name = "log.segment.delete.delay.ms", .type = int64, .default_value = "60000", .min = 0, .importance = high,
     .update_mode = cluster_wide, .doc = "How long a deleted segment's files are kept (renamed .deleted) first."},
    {.name = "log.message.timestamp.type", .type = string, .default_value = "CreateTime",
     .allowed = {"CreateTime", "LogAppendTime"}, .importance = medium, .update_mode = cluster_wide,
     .doc = "Whether record timestamps are the producer's (CreateTime) or the broker's append time."},
    {.name = "log.flush.offset.checkpoint.interval.ms", .type = int32, .default_value = "60000", .min = 0,
     .importance = high, .doc = "How often the recovery points (recovery-point-offset-checkpoint) are written."},
    {.name = "log.flush.start.offset.checkpoint.interval.ms", .type = int32, .default_value = "60000", .min = 0,
     .importance = high, .doc = "How often the log start offsets (log-start-offset-checkpoint) are written."},
    {.name = "log.index.interval.bytes", .type = int32, .default_value = "4096", .min = 0, .importance = medium,
     .update_mode = cluster_wide, .doc = "Bytes of log between two offset index entries."},
    {.name = "log.index.size.max.bytes", .type = int32, .default_value = "10485760", .min = 4,
     .importance = medium, .update_mode = cluster_wide, .doc = "The maximum size in bytes of the offset index."},
    {.name = "log.flush.interval.messages", .type = int64, .default_value = "9223372036854775807", .min = 1,
     .importance = high, .update_mode = cluster_wide,
     .doc = "Messages accumulated on a partition before they are flushed to disk."},
    {.name = "log.flush.interval.ms", .type = int64, .importance = high, .update_mode = cluster_wide,
     .doc = "Maximum time a message stays unflushed; log.flush.scheduler.interval.ms when unset."},
    {.name = "log.flush.scheduler.interval.ms", .type = int64, .default_value = "9223372036854775807",
     .importance = high, .doc = "How often the flusher checks whether any log needs flushing."},
    {.name = "log.cleanup.policy", .type = list, .default_value = "delete", .allowed = {"compact", "delete"},
     .importance = medium, .update_mode = cluster_wide,
     .doc = "Default cleanup policy for segments beyond the retention window: delete, compact or both."},
    {.name = "log.cleaner.enable", .type = boolean, .default_value = "true", .importance = medium,
     .doc = "Run the log cleaner, which compacts the logs of topics with cleanup.policy=compact."},
    {.name = "log.cleaner.threads", .type = int32, .default_value = "1", .min = 0, .importance = medium,
     .doc = "The number of log cleaner threads (off the request shards)."},
    {.name = "log.cleaner.backoff.ms", .type = int64, .default_value = "15000", .min = 0, .importance = medium,
     .doc = "How long a cleaner thread sleeps when no log needs cleaning."},
    {.name = "log.cleaner.dedupe.buffer.size", .type = int64, .default_value = "134217728", .importance = medium,
     .doc = "Memory for the key maps of all cleaner threads (24 bytes per key: a 128-bit hash and an offset)."},
    {.name = "log.cleaner.io.buffer.size", .type = int32, .default_value = "524288", .min = 0,
     .importance = medium, .doc = "Accepted for compatibility; the cleaner reads a segment a megabyte at a time."},
    {.name = "log.cleaner.io.buffer.load.factor", .type = float64, .default_value = "0.9",
     .importance = medium, .doc = "How full a key map may get before a cleaning round stops taking keys."},
    {.name = "log.cleaner.io.max.bytes.per.second", .type = float64, .default_value = "1.7976931348623157E308",
     .importance = medium, .doc = "The cleaner's I/O throttle: bytes read plus written per second, all threads."},
    {.name = "log.cleaner.min.cleanable.ratio", .type = float64, .default_value = "0.5", .importance = medium,
     .update_mode = cluster_wide, .doc = "Default min.cleanable.dirty.ratio: the dirty share that triggers a clean."},
    {.name = "log.cleaner.min.compaction.lag.ms", .type = int64, .default_value = "0", .min = 0,
     .importance = medium, .update_mode = cluster_wide,
     .doc = "Default min.compaction.lag.ms: records younger than this are not compacted."},
    {.name = "log.cleaner.max.compaction.lag.ms", .type = int64, .default_value = "9223372036854775807", .min = 1,
     .importance = medium, .update_mode = cluster_wide,
     .doc = "Default max.compaction.lag.ms: a record older than this makes its log cleanable at any ratio."},
    {.name = "log.cleaner.delete.retention.ms", .type = int64, .default_value = "86400000", .min = 0,
     .importance = medium, .update_mode = cluster_wide,
     .doc = "Default delete.retention.ms: how long tombstones stay after the clean that first kept them."},
    {.name = "num.recovery.threads.per.data.dir", .type = int32, .default_value = "1", .min = 1,
     .importance = high, .update_mode = cluster_wide,
     .doc = "Threads per log dir used for recovery at startup and flushing at shutdown."},

    // --- Replication
    {.name = "unclean.leader.election.enable", .type = boolean, .default_value = "false", .importance = high,
     .update_mode = cluster_wide,
     .doc = "Allow electing a replica outside the ISR (and ELR) as a last resort, losing data."},
    {.name = "auto.leader.rebalance.enable", .type = boolean, .default_value = "true", .importance = high,
     .doc = "Periodically move leadership back to preferred replicas."},
    {.name = "leader.imbalance.check.interval.seconds", .type = int64, .default_value = "300", .min = 1,
     .importance = high, .doc = "How often the controller moves leadership back to preferred replicas."},
    {.name = "replica.lag.time.max.ms", .type = int64, .default_value = "30000", .importance = high,
     .doc = "A follower that has not caught up for this long is removed from the ISR."},
    {.name = "replica.fetch.max.bytes", .type = int32, .default_value = "1048576", .min = 0, .importance = medium,
     .doc = "Bytes fetched per partition by a follower (a larger first batch is still returned)."},
    {.name = "replica.fetch.wait.max.ms", .type = int32, .default_value = "500", .importance = medium,
     .doc = "Maximum wait of a follower fetch; must not exceed replica.lag.time.max.ms."},
    {.name = "replica.fetch.min.bytes", .type = int32, .default_value = "1", .importance = high,
     .doc = "Minimum bytes a follower fetch waits for."},
    {.name = "num.replica.fetchers", .type = int32, .default_value = "1", .min = 1, .importance = high,
     .update_mode = cluster_wide, .doc = "Fetcher threads per source broker."},

    // --- Coordinators and internal topics
    {.name = "offsets.topic.num.partitions", .type = int32, .default_value = "50", .min = 1, .importance = high,
     .doc = "Partitions of __consumer_offsets (must not change after deployment)."},
    {.name = "offsets.topic.replication.factor", .type = int16, .default_value = "3", .min = 1,
     .importance = high, .doc = "Replication factor of __consumer_offsets."},
    {.name = "offsets.retention.minutes", .type = int32, .default_value = "10080", .min = 1, .importance = high,
     .doc = "Committed offsets of an empty classic group are kept this long; in a consumer group, an offset of a topic no member subscribes to, this long after its commit."},
    // KIP-848 consumer groups (ConsumerGroupHeartbeat), GroupCoordinatorConfig's group.consumer.* keys.
    {.name = "group.consumer.assignors", .type = list, .default_value = "uniform,range", .importance = medium,
     .doc = "The server-side assignors of consumer groups, the first being the default (uniform, range)."},
    {.name = "group.consumer.heartbeat.interval.ms", .type = int32, .default_value = "5000", .min = 1,
     .importance = medium, .doc = "How often a consumer group member heartbeats (told in every answer)."},
    {.name = "group.consumer.max.heartbeat.interval.ms", .type = int32, .default_value = "15000", .min = 1,
     .importance = medium, .doc = "The largest heartbeat interval a group config may set."},
    {.name = "group.consumer.max.session.timeout.ms", .type = int32, .default_value = "60000", .min = 1,
     .importance = medium, .doc = "The largest session timeout a group config may set."},
    {.name = "group.consumer.max.size", .type = int32, .default_value = "2147483647", .min = 1,
     .importance = medium, .doc = "Maximum number of members in one consumer group (GROUP_MAX_SIZE_REACHED)."},
    {.name = "group.consumer.migration.policy", .type = string, .default_value = "bidirectional",
     .allowed = {"disabled", "upgrade", "downgrade", "bidirectional"}, .importance = medium,
     .doc = "Whether empty classic groups may become consumer groups (upgrade) and back (downgrade)."},
    {.name = "group.consumer.min.heartbeat.interval.ms", .type = int32, .default_value = "5000", .min = 1,
     .importance = medium, .doc = "The smallest heartbeat interval a group config may set."},
    {.name = "group.consumer.min.session.timeout.ms", .type = int32, .default_value = "45000", .min = 1,
     .importance = medium, .doc = "The smallest session timeout a group config may set."},
    {.name = "group.consumer.session.timeout.ms", .type = int32, .default_value = "45000", .min = 1,
     .importance = medium, .doc = "A consumer group member without a heartbeat for this long is removed."},
    {.name = "group.initial.rebalance.delay.ms", .type = int32, .default_value = "3000", .importance = medium,
     .doc = "Delay of the first rebalance of a new classic group, to let more members join."},
    {.name = "group.max.size", .type = int32, .default_value = "2147483647", .min = 1, .importance = medium,
     .doc = "Maximum number of members in one classic group."},
    {.name = "group.min.session.timeout.ms", .type = int32, .default_value = "6000", .importance = medium,
     .doc = "The minimum session timeout a classic group member may ask for."},
    {.name = "group.max.session.timeout.ms", .type = int32, .default_value = "1800000", .importance = medium,
     .doc = "The maximum session timeout a classic group member may ask for."},
    {.name = "offsets.retention.check.interval.ms", .type = int64, .default_value = "600000", .min = 1,
     .importance = high, .doc = "How often the coordinator looks for expired committed offsets."},
    {.name = "offset.metadata.max.bytes", .type = int32, .default_value = "4096", .importance = high,
     .doc = "The largest metadata string an offset commit may carry (OFFSET_METADATA_TOO_LARGE beyond)."},
    {.name = "offsets.commit.timeout.ms", .type = int32, .default_value = "5000", .min = 1, .importance = high,
     .doc = "How long an offset commit waits for its record to be committed to __consumer_offsets."},
    {.name = "offsets.load.buffer.size", .type = int32, .default_value = "5242880", .min = 1,
     .importance = high, .doc = "Bytes read at a time when a coordinator loads a __consumer_offsets partition."},
    {.name = "offsets.topic.compression.codec", .type = int32, .default_value = "0", .min = 0, .max = 4,
     .importance = high,
     .doc = "Compression of the batches the group coordinator writes to __consumer_offsets: 0 none, 1 gzip, "
            "2 snappy, 3 lz4, 4 zstd."},
    {.name = "offsets.topic.segment.bytes", .type = int32, .default_value = "104857600", .min = 1,
     .importance = high, .doc = "segment.bytes of __consumer_offsets, kept small for fast compaction and loading."},
    {.name = "producer.id.expiration.ms", .type = int32, .default_value = "86400000", .min = 1, .importance = low,
     .update_mode = cluster_wide,
     .doc = "The time in ms that a topic partition leader will wait before expiring producer IDs. Producer IDs "
            "will not expire while a transaction associated to them is still ongoing. Note that producer IDs may "
            "expire sooner if the last write from the producer ID is deleted due to the topic's retention "
            "settings."},
    {.name = "producer.id.expiration.check.interval.ms", .type = int32, .default_value = "600000", .min = 1,
     .importance = low,
     .doc = "The interval at which to remove producer IDs that have expired due to producer.id.expiration.ms "
            "passing (an internal key in Kafka, for tests)."},
    {.name = "transaction.state.log.replication.factor", .type = int16, .default_value = "3", .min = 1,
     .importance = high, .doc = "Replication factor of __transaction_state."},
    {.name = "transaction.state.log.min.isr", .type = int32, .default_value = "2", .min = 1, .importance = high,
     .doc = "min.insync.replicas of __transaction_state."},
    {.name = "transaction.state.log.num.partitions", .type = int32, .default_value = "50", .min = 1,
     .importance = high, .doc = "Partitions of __transaction_state (should not change after it is created)."},
    {.name = "transaction.state.log.segment.bytes", .type = int32, .default_value = "104857600", .min = 1,
     .importance = high, .doc = "segment.bytes of __transaction_state, kept small for fast compaction and loading."},
    {.name = "transaction.state.log.load.buffer.size", .type = int32, .default_value = "5242880", .min = 1,
     .importance = low, .doc = "Bytes read at a time when a coordinator loads a __transaction_state partition."},
    {.name = "transaction.max.timeout.ms", .type = int32, .default_value = "900000", .min = 1, .importance = high,
     .doc = "The largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above)."},
    {.name = "transaction.partition.verification.enable", .type = boolean, .default_value = "true",
     .importance = low,
     .doc = "Partition leaders ask the transaction coordinator whether a transactional batch's partition is in "
            "the producer's transaction before writing it (KIP-890)."},
    {.name = "transactional.id.expiration.ms", .type = int32, .default_value = "604800000", .min = 1,
     .importance = high,
     .doc = "How long the coordinator keeps a transactional id whose producer sent nothing (no transaction "
            "open) before it removes it."},
    {.name = "transaction.abort.timed.out.transaction.cleanup.interval.ms", .type = int32,
     .default_value = "10000", .min = 1, .importance = low,
     .doc = "How often the coordinator aborts transactions open longer than their timeout."},
    {.name = "transaction.remove.expired.transaction.cleanup.interval.ms", .type = int32,
     .default_value = "3600000", .min = 1, .importance = low,
     .doc = "How often the coordinator removes transactional ids past transactional.id.expiration.ms."},
    {.name = "share.coordinator.state.topic.replication.factor", .type = int16, .default_value = "3", .min = 1,
     .importance = high, .doc = "Replication factor of __share_group_state (accepted; share groups unsupported)."},
    {.name = "share.coordinator.state.topic.min.isr", .type = int16, .default_value = "2", .min = 1,
     .importance = high, .doc = "min.insync.replicas of __share_group_state (accepted; share groups unsupported)."},
    // --- TLS (SSL listeners; each key may be overridden per listener as listener.name.<listener>.ssl.*)
    {.name = "ssl.keystore.type", .type = string, .importance = medium,
     .doc = "Format of the key store: PEM or PKCS12. Kafka's default, JKS, is not supported; unset means PKCS12 "
            "for a .p12/.pfx file and PEM otherwise."},
    {.name = "ssl.keystore.location", .type = string, .importance = high,
     .doc = "The key store file: the listener's certificate chain and private key."},
    {.name = "ssl.keystore.password", .type = password, .importance = high,
     .doc = "Password of the key store file (PKCS12)."},
    {.name = "ssl.key.password", .type = password, .importance = high,
     .doc = "Password of the private key (an encrypted PEM key, in the file or in ssl.keystore.key)."},
    {.name = "ssl.keystore.certificate.chain", .type = password, .importance = high,
     .doc = "The certificate chain in PEM, inline (with ssl.keystore.key, instead of ssl.keystore.location)."},
    {.name = "ssl.keystore.key", .type = password, .importance = high,
     .doc = "The private key in PEM (PKCS#8, possibly encrypted with ssl.key.password), inline."},
    {.name = "ssl.truststore.type", .type = string, .importance = medium,
     .doc = "Format of the trust store: PEM or PKCS12 (JKS unsupported); unset as ssl.keystore.type."},
    {.name = "ssl.truststore.location", .type = string, .importance = high,
     .doc = "The trust store file: the CA certificates client certificates are verified against."},
    {.name = "ssl.truststore.password", .type = password, .importance = high,
     .doc = "Password of the trust store file (PKCS12)."},
    {.name = "ssl.truststore.certificates", .type = password, .importance = high,
     .doc = "Trusted certificates in PEM, inline (instead of ssl.truststore.location)."},
    {.name = "ssl.client.auth", .type = string, .default_value = "none",
     .allowed = {"required", "requested", "none"}, .importance = medium,
     .doc = "Client authentication by certificate: required, requested (verified when sent) or none."},
    {.name = "ssl.enabled.protocols", .type = list, .default_value = "TLSv1.2,TLSv1.3", .importance = medium,
     .doc = "TLS versions accepted (TLSv1.2, TLSv1.3; TLSv1 and TLSv1.1 where OpenSSL still allows them)."},
    {.name = "ssl.protocol", .type = string, .default_value = "TLSv1.3", .importance = medium,
     .doc = "The TLS protocol of the SSL context (Kafka's SSLContext protocol); ssl.enabled.protocols bounds the "
            "versions negotiated."},
    {.name = "ssl.cipher.suites", .type = list, .default_value = "", .importance = low,
     .doc = "Cipher suites allowed, by their IANA names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_"
            "SHA256) or OpenSSL's; empty: OpenSSL's defaults."},
    {.name = "ssl.endpoint.identification.algorithm", .type = string, .default_value = "https", .importance = low,
     .doc = "Server host name verification by the node's own TLS clients: https, or empty to disable."},
    {.name = "ssl.allow.dn.changes", .type = boolean, .default_value = "false", .importance = low,
     .doc = "Whether a key store update at run time may change the certificate's subject distinguished name."},
    {.name = "ssl.allow.san.changes", .type = boolean, .default_value = "false", .importance = low,
     .doc = "Whether a key store update at run time may drop subject alternative names of the certificate."},
    {.name = "ssl.principal.mapping.rules", .type = string, .default_value = "DEFAULT", .importance = low,
     .doc = "Rules mapping a client certificate's distinguished name (RFC 2253) to its principal name: DEFAULT "
            "or RULE:pattern/replacement/[LU], comma-separated; the first that applies wins."},
  };
  // clang-format on
  std::sort(keys.begin(), keys.end(),
            [](const config_key& a, const config_key& b) { return a.name < b.name; });
  return keys;
}

}  // namespace

std::span<const config_key> known_config_keys() {
  static const std::vector<config_key> table = build_table();
  return table;
}

const config_key* find_config_key(std::string_view name) {
  auto keys = known_config_keys();
  auto it = std::lower_bound(keys.begin(), keys.end(), name,
                             [](const config_key& k, std::string_view n) { return k.name < n; });
  if (it == keys.end() || it->name != name) return nullptr;
  return &*it;
}

std::string describe_valid_values(const config_key& key) {
  if (!key.allowed.empty()) {
    std::string out = "[";
    for (size_t i = 0; i < key.allowed.size(); ++i) {
      if (i > 0) out += ", ";
      out += key.allowed[i];
    }
    return out + "]";
  }
  if (key.min && key.max) return "[" + std::to_string(*key.min) + ",...," + std::to_string(*key.max) + "]";
  if (key.min) return "[" + std::to_string(*key.min) + ",...]";
  if (key.max) return "[...," + std::to_string(*key.max) + "]";
  return "";
}

std::string_view to_string(config_type type) {
  switch (type) {
    case boolean:
      return "boolean";
    case string:
      return "string";
    case int32:
      return "int";
    case int16:
      return "short";
    case int64:
      return "long";
    case float64:
      return "double";
    case list:
      return "list";
    case password:
      return "password";
    case class_name:
      return "class";
  }
  return "string";
}

std::string_view to_string(config_importance importance) {
  switch (importance) {
    case high:
      return "high";
    case medium:
      return "medium";
    case low:
      return "low";
  }
  return "medium";
}

std::string_view to_string(config_update_mode mode) {
  switch (mode) {
    case read_only:
      return "read-only";
    case per_broker:
      return "per-broker";
    case cluster_wide:
      return "cluster-wide";
  }
  return "read-only";
}

std::string_view to_string(config_source source) {
  switch (source) {
    case config_source::default_value:
      return "default";
    case config_source::file:
      return "file";
    case config_source::override_value:
      return "override";
  }
  return "default";
}

}  // namespace mala
