"""How the integration test files are spread over pytest-xdist workers (scripts/test.sh runs them with
`-n 3 --dist loadfile`): whole files, the longest first, so that no long file starts late and runs alone at the end.

xdist's own file scheduling orders files by their number of tests, and gives a worker its next file as soon as two
or fewer of its tests are left. A worker holds its last test until it knows the next one (pytest tears fixtures
down by the next test), so the next file is picked when the last test of the worker's files starts:
- if that test is expected to end soon, the longest file left;
- if it is a long one (the 10,000-partition cluster takes 7 minutes), the shortest file left, so that no long file
  waits behind it while another worker is idle.
The expected times are measured ones (FILE_SECONDS, seconds per file with three workers on two cores); a file not
listed counts DEFAULT_SECONDS_PER_TEST per test.
"""

from pathlib import PurePosixPath

FILE_SECONDS = {
    "test_partition_scale.py": 725, "test_transactions.py": 470, "test_log_compaction_crash.py": 335,
    "test_replication_failover.py": 260, "test_transactions_clients.py": 255, "test_streams_eos.py": 250,
    "test_transactions_faults.py": 225, "test_log_compaction.py": 195, "test_cluster_quorum.py": 170,
    "test_sasl_oauthbearer.py": 125, "test_features.py": 95, "test_transactions_v2.py": 95, "test_kafka_connect.py": 90,
    "test_schema_registry.py": 80, "test_docker_topology.py": 80, "test_quotas.py": 75, "test_tls.py": 70,
    "test_cluster_admin_visibility.py": 65, "test_sasl.py": 60, "test_delete_records_replicated.py": 55,
    "test_consumer_groups_848.py": 55, "test_consumer_groups_tool_vs_kafka.py": 50, "test_produce_consume.py": 45,
    "test_sasl_inter_broker.py": 40, "test_live_topic_configs.py": 35, "test_consumer_groups_clients.py": 35,
    "test_whole_cluster_crash_elections.py": 35, "test_topic_admin.py": 35, "test_compaction_transactions.py": 25,
    "test_transactions_bad_input.py": 25, "test_transaction_log_format.py": 20, "test_consumer_groups.py": 15,
}
DEFAULT_SECONDS_PER_TEST = 4
# A worker whose remaining tests are expected to take longer than this gets the shortest file left as its next one.
LONG_REMAINDER_SECONDS = 90


def file_seconds(scope, test_count):
    return FILE_SECONDS.get(PurePosixPath(scope.split("::")[0]).name, DEFAULT_SECONDS_PER_TEST * test_count)


def make_scheduler(config, log):
    from xdist.scheduler import LoadFileScheduling

    class LongestFileFirstScheduling(LoadFileScheduling):
        def _expected(self, scope, tests):
            return file_seconds(scope, len(tests))

        def _remaining_seconds(self, node):
            total = 0.0
            for scope, tests in self.assigned_work.get(node, {}).items():
                pending = list(tests.values()).count(False)
                total += self._expected(scope, tests) * pending / max(1, len(tests))
            return total

        def _reschedule(self, node):
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            # Two tests left: the worker runs one and holds the other, so it needs nothing yet.
            if self._pending_of(self.assigned_work.get(node, {})) > 1:
                return
            self._assign_work_unit(node)

        def _assign_work_unit(self, node):
            assert self.workqueue
            by_length = sorted(self.workqueue, key=lambda s: self._expected(s, self.workqueue[s]), reverse=True)
            long_remainder = self._remaining_seconds(node) > LONG_REMAINDER_SECONDS
            scope = by_length[-1] if long_remainder else by_length[0]
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

    return LongestFileFirstScheduling(config, log)


def sort_longest_files_first(items):
    """Without xdist: the same order (stable, so a file's tests keep theirs)."""
    counts = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1
    items.sort(key=lambda item: -file_seconds(item.path.name, counts[item.path.name]))
