"""OAUTHBEARER between nodes (issue 23): a 3-node cluster whose inter-broker listener (replica fetchers, transaction
markers) validates signed JWTs against the identity provider's JWKS (OAuthBearerValidatorCallbackHandler) and whose
controller listener (Raft, registration, heartbeats, forwarding) runs Kafka's unsecured validator. Each node logs in
as Kafka's broker does for its inter-broker clients, with the listener's OAuthBearerLoginModule:

- INTERNAL: OAuthBearerLoginCallbackHandler against the identity provider's token endpoint (http, the client
  credentials grant with the module's clientId / clientSecret / scope); the provider signs each token for the
  client id that authenticated.
- CONTROLLER: Kafka's default unsecured login (unsecuredLoginStringClaim_sub, a scope list claim), the validator
  requiring that scope.

With 4 s sessions (connections.max.reauth.ms) the nodes replace their connections with a token they present again;
a leader SIGKILLed under idempotent acks=all load (min ISR 2) loses nothing, and a committed transaction (markers
over the inter-broker listener) reads back with read_committed. A node whose client secret the provider refuses does
not start and says why without the secret. confluent-kafka is the client, on a PLAINTEXT listener."""

import base64
import json
import subprocess
import threading
import uuid

from confluent_kafka.admin import AdminClient

from cluster import own_cluster, render_yaml
from conftest import MALA_BIN, free_port
from test_sasl_inter_broker import commit_ten_records, create_topic, isr_of, load_kill_leader_and_read_back
from test_sasl_oauthbearer import MODULE, SIGNED_HANDLER, JwksServer, KeyPair, claims_for

LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
CLIENT_SECRETS = {"broker-1": "secret-one", "broker-2": "secret-two", "broker-3": "secret-three"}


class TokenEndpoint:
    """The identity provider's token endpoint: POST grant_type=client_credentials with HTTP Basic client credentials,
    answered with an access token signed by `key` whose sub is the client id and whose scope is what was asked."""

    def __init__(self, key, lifetime_s=3600):
        import http.server
        import urllib.parse
        endpoint = self
        self.requests, self.refused = [], 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                form = urllib.parse.parse_qs(body)
                auth = self.headers.get("Authorization", "")
                client_id, secret = "", ""
                if auth.startswith("Basic "):
                    decoded = base64.b64decode(auth[6:]).decode()
                    client_id, _, secret = decoded.partition(":")
                    client_id, secret = urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)
                endpoint.requests.append((client_id, form))
                if form.get("grant_type") != ["client_credentials"] or CLIENT_SECRETS.get(client_id) != secret:
                    endpoint.refused += 1
                    answer, status = {"error": "invalid_client"}, 401
                else:
                    claims = claims_for(client_id, lifetime_s, scope=form.get("scope", [""])[0])
                    answer, status = {"access_token": key.sign(claims), "token_type": "bearer",
                                      "expires_in": lifetime_s}, 200
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/oauth2/token"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def oauth_cluster(cluster, jwks_url, token_url, secrets=None):
    """CLIENT (PLAINTEXT) / INTERNAL (SASL_PLAINTEXT, signed JWTs, the node logs in at the token endpoint) /
    CONTROLLER (SASL_PLAINTEXT, unsecured JWS requiring scope "controller")."""
    for n in cluster.nodes.values():
        internal = free_port()
        while internal in (n.port, n.controller_port):
            internal = free_port()
        n.internal_port = internal
        client_id = f"broker-{n.node_id}"
        secret = (secrets or CLIENT_SECRETS)[client_id]
        n.config.update({
            "listeners": [f"CLIENT://127.0.0.1:{n.port}", f"INTERNAL://127.0.0.1:{internal}",
                          f"CONTROLLER://127.0.0.1:{n.controller_port}"],
            "advertised.listeners": f"CLIENT://127.0.0.1:{n.port},INTERNAL://127.0.0.1:{internal}",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "listener.name.internal.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.internal.oauthbearer.sasl.jaas.config":
                f'{MODULE} required clientId="{client_id}" clientSecret="{secret}" scope="inter-broker";',
            "listener.name.internal.oauthbearer.sasl.server.callback.handler.class": SIGNED_HANDLER,
            "listener.name.internal.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_url,
            "listener.name.internal.oauthbearer.sasl.login.callback.handler.class": LOGIN_HANDLER,
            "listener.name.internal.oauthbearer.sasl.oauthbearer.token.endpoint.url": token_url,
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": "https://idp.test",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            "listener.name.controller.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.controller.oauthbearer.sasl.jaas.config":
                f'{MODULE} required unsecuredLoginStringClaim_sub="controller-{n.node_id}" '
                'unsecuredLoginListClaim_scope=",controller,metadata" unsecuredValidatorRequiredScope="controller";',
            "sasl.mechanism.controller.protocol": "OAUTHBEARER",
            "connections.max.reauth.ms": 4000,
            "log.level": "info",
        })


def test_oauthbearer_between_brokers_and_controllers_survives_leader_kill(tmp_path):
    key = KeyPair("idp-1")
    jwks, tokens = JwksServer([key]), TokenEndpoint(key)
    try:
        with own_cluster(tmp_path) as cluster:
            oauth_cluster(cluster, jwks.url, tokens.url)
            cluster.start_all()
            # Every node obtained its token at start-up, with its own client id and the module's scope.
            assert sorted({client for client, _ in tokens.requests}) == ["broker-1", "broker-2", "broker-3"]
            assert all(form.get("scope") == ["inter-broker"] for _, form in tokens.requests), tokens.requests
            assert tokens.refused == 0

            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            topic = f"oauth-ib-{uuid.uuid4().hex[:8]}"
            create_topic(cluster, admin, topic)
            leader = cluster.wait_until(
                lambda: isr_of(admin, topic)[0] if len(isr_of(admin, topic)[1]) == 3 else None,
                timeout=30, interval=0.2, what="partition 0 with an ISR of 3 (followers fetching over OAUTHBEARER)")
            txn_topic = f"oauth-txn-{uuid.uuid4().hex[:8]}"
            create_topic(cluster, admin, txn_topic)
            commit_ten_records(cluster, txn_topic, {})
            # Idempotent acks=all load over several 4 s sessions of the nodes' own connections; the leader is
            # SIGKILLed while records are in flight.
            load_kill_leader_and_read_back(cluster, topic, txn_topic, leader, {})

            # The survivors authenticated each other on both listeners, renewed before their sessions ended,
            # and no secret or token reached a log.
            for i in cluster.ids:
                text = cluster.node(i).log_path.read_text(errors="replace")
                assert "the server refused" not in text, cluster.node(i).log_text(50)
                for secret in CLIENT_SECRETS.values():
                    assert secret not in text, f"node {i} logged a client secret"
                assert "eyJ" not in text, f"node {i} logged a token"
                for n in cluster.ids:
                    for user in (f"broker-{n}", f"controller-{n}"):
                        assert f"the SASL session of {user} expired" not in text, f"node {i}: {user}'s session expired"
            del admin
    finally:
        jwks.close()
        tokens.close()


def test_a_node_the_token_endpoint_refuses_does_not_start(tmp_path):
    key = KeyPair("idp-1")
    jwks, tokens = JwksServer([key]), TokenEndpoint(key)
    try:
        with own_cluster(tmp_path, size=1) as cluster:
            oauth_cluster(cluster, jwks.url, tokens.url, secrets={"broker-1": "not-the-secret"})
            n = cluster.node(1)
            n.config_path.write_text(render_yaml(n.config))
            out = subprocess.run([str(MALA_BIN), "--config", str(n.config_path)], capture_output=True, text=True,
                                 timeout=60)
            assert out.returncode != 0
            text = out.stdout + out.stderr
            assert "cannot obtain the node's OAUTHBEARER token" in text and "HTTP status 401" in text, text
            assert "not-the-secret" not in text
            assert tokens.refused >= 1
    finally:
        jwks.close()
        tokens.close()
