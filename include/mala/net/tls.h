// TLS for SSL listeners, through OpenSSL (asio::ssl): the server context of a listener built from its
// tls_settings (key store, trust store, client authentication, protocols, cipher suites), and the Kafka
// principal of a client from its certificate (subject DN as Java's X500Principal.getName() formats it, mapped
// by ssl.principal.mapping.rules).
//
// Building a context reads files and runs once per listener at start-up, on the starting thread; a context
// is then shared by the listener's connections on every shard (OpenSSL's SSL_CTX is safe to share).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <asio/ssl/context.hpp>

#include "mala/common/result.h"
#include "mala/common/ssl_principal_mapper.h"
#include "mala/common/tls_settings.h"

namespace mala::net {

struct tls_listener_context {
  std::string listener_name;
  asio::ssl::context context{asio::ssl::context::tls_server};
  ssl_principal_mapper principal_mapper;
  ssl_client_auth client_auth = ssl_client_auth::none;
};

// The client side of node-to-node connections (replication, transaction markers, forwarding, broker
// registration, Raft) made through an SSL listener: the node's own settings of that listener, as Kafka's
// inter-broker and controller clients use `listener.name.<l>.ssl.*`. The trust store verifies the server;
// the key store, when given, is the client certificate (for ssl.client.auth=required/requested);
// ssl.endpoint.identification.algorithm=https checks the server certificate's names against the host
// connected to (empty: no check).
//
// The SSL context is swapped as a whole when the listener's key or trust store is updated at run time
// (replace): a connection takes current() when it starts and keeps that context, by its pointer, for its
// life; the users sharing this object (peer clients, Raft, replica fetchers) get the new stores with their
// next connection. Safe to call from any thread.
struct tls_client_context {
  std::string listener_name;
  bool verify_hostname = true;

  std::shared_ptr<asio::ssl::context> current() const;
  void replace(std::shared_ptr<asio::ssl::context> next);

 private:
  mutable std::mutex _mutex;
  std::shared_ptr<asio::ssl::context> _context =
      std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
};

result<std::shared_ptr<tls_client_context>> make_tls_client_context(const tls_settings& settings);

// Prepares one client connection of `client`: SNI (for a host name) and, with hostname verification, the
// name or IP address the server certificate must hold. False when OpenSSL refuses it.
bool prepare_tls_client_connection(const tls_client_context& client, SSL* ssl, const std::string& host);

// Builds a listener's server context. Errors (invalid_config) name the listener and the key whose value is
// at fault (a missing or unreadable key store file, a wrong password, a key that does not match the
// certificate, an unknown cipher suite) with OpenSSL's reason.
result<std::shared_ptr<tls_listener_context>> make_tls_listener_context(const tls_settings& settings);

// A distinguished name as Java's X500Principal.getName() (RFC 2253) writes it: most specific RDN first,
// `,` between RDNs and `+` inside one, CN C L ST O OU STREET DC UID by keyword and other attributes as
// `<oid>=#<hex of the DER value>`, `,=+<>#;"\` escaped with a backslash, and leading/trailing spaces too.
std::string format_x500_name(const X509_NAME* name);

// The principal name of the peer of an established TLS connection: its certificate's subject mapped by the
// listener's rules; "ANONYMOUS" without a client certificate. nullopt when no mapping rule applies (the
// connection is then refused, as Kafka fails such an authentication); `dn` receives the subject for logs.
std::optional<std::string> tls_peer_principal(const tls_listener_context& listener, SSL* ssl,
                                              std::string& dn);

// What Kafka's dynamic key store update keeps unless allowed to change (SslFactory's CertificateEntries
// .ensureCompatible, `ssl.allow.dn.changes` / `ssl.allow.san.changes`): the subject DN (RFC 2253, as
// format_x500_name) and the subjectAltNames ("DNS:host", "IP:addr", "URI:...", "email:...") of a listener's
// certificate. nullopt when the context has no certificate.
struct certificate_identity {
  std::string subject;
  std::set<std::string> subject_alt_names;
};
std::optional<certificate_identity> listener_certificate_identity(const tls_listener_context& listener);

// Whether `next` may replace `current` on a running listener: none, or the INVALID_CONFIG error with
// Kafka's message (the DN differs, ignoring case, unless allow_dn_changes; a SAN of `current` is missing
// from `next` unless allow_san_changes).
status check_certificate_update(const certificate_identity& current, const certificate_identity& next,
                                bool allow_dn_changes, bool allow_san_changes);

// The reason of the latest OpenSSL error on this thread (its queue cleared), or `fallback` when none.
std::string openssl_error_reason(std::string fallback);

}  // namespace mala::net
