#include "mala/net/tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/write.hpp>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509v3.h>

#include "mala/net/kafka_server.h"
#include "mala/net/request_dispatcher.h"
#include "mala/net/shard_pool.h"

namespace mala::net {
namespace {

struct name_deleter {
  void operator()(X509_NAME* n) const { X509_NAME_free(n); }
};
using name_ptr = std::unique_ptr<X509_NAME, name_deleter>;

// Entries in ASN.1 order (least specific first), each its own RDN unless `same_rdn`.
struct attribute {
  const char* field;
  std::string value;
  int type = MBSTRING_UTF8;
  bool same_rdn = false;
};

name_ptr make_name(const std::vector<attribute>& attributes) {
  name_ptr name(X509_NAME_new());
  for (const auto& a : attributes) {
    EXPECT_EQ(X509_NAME_add_entry_by_txt(name.get(), a.field, a.type,
                                         reinterpret_cast<const unsigned char*>(a.value.data()),
                                         static_cast<int>(a.value.size()), -1, a.same_rdn ? -1 : 0),
              1)
        << a.field;
  }
  return name;
}

TEST(tls_test, formats_names_as_java_x500_principal) {
  EXPECT_EQ(format_x500_name(make_name({{"O", "acme"}, {"OU", "eng"}, {"CN", "client"}}).get()),
            "CN=client,OU=eng,O=acme");
  EXPECT_EQ(format_x500_name(make_name({{"C", "US"},
                                        {"ST", "MD"},
                                        {"L", "Fulton"},
                                        {"street", "1 Main St"},
                                        {"DC", "example"},
                                        {"UID", "u1"},
                                        {"CN", "Duke"}})
                                 .get()),
            "CN=Duke,UID=u1,DC=example,STREET=1 Main St,L=Fulton,ST=MD,C=US");
  // RFC 2253 special characters, and leading/trailing spaces, escaped; others (UTF-8 included) verbatim.
  EXPECT_EQ(format_x500_name(make_name({{"CN", "a,b+c=d<e>f#g;h\"i\\j"}}).get()),
            "CN=a\\,b\\+c\\=d\\<e\\>f\\#g\\;h\\\"i\\\\j");
  EXPECT_EQ(format_x500_name(make_name({{"CN", " padded  "}}).get()), "CN=\\ padded\\ \\ ");
  EXPECT_EQ(format_x500_name(make_name({{"CN", "#1 Zoë"}}).get()), "CN=\\#1 Zoë");
  // Attributes without an RFC 2253 keyword: their OID and the DER of the value in hex.
  EXPECT_EQ(format_x500_name(make_name({{"CN", "x"}, {"emailAddress", "a@b", MBSTRING_ASC}}).get()),
            "1.2.840.113549.1.9.1=#1603614062,CN=x");
  EXPECT_EQ(format_x500_name(make_name({{"O", "acme"}, {"CN", "a"}, {"UID", "b", MBSTRING_ASC, true}}).get()),
            "CN=a+UID=b,O=acme");
  EXPECT_EQ(format_x500_name(make_name({}).get()), "");
}

struct pkey_deleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct x509_deleter {
  void operator()(X509* c) const { X509_free(c); }
};

// A self-signed certificate and its key, in PEM; `subject` in ASN.1 order.
// `subject_alt_names` in OpenSSL's configuration form ("DNS:localhost,IP:127.0.0.1"), none when null.
std::pair<std::string, std::string> self_signed(
    const std::vector<std::pair<const char*, const char*>>& subject, int valid_from_s = 0,
    const char* subject_alt_names = nullptr) {
  std::unique_ptr<EVP_PKEY, pkey_deleter> key(EVP_EC_gen("P-256"));
  std::unique_ptr<X509, x509_deleter> cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), valid_from_s);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), valid_from_s + 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& [field, value] : subject) {
    X509_NAME_add_entry_by_txt(name, field, MBSTRING_ASC, reinterpret_cast<const unsigned char*>(value), -1,
                               -1, 0);
  }
  X509_set_issuer_name(cert.get(), name);
  if (subject_alt_names) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, subject_alt_names);
    X509_add_ext(cert.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_set_pubkey(cert.get(), key.get());
  X509_sign(cert.get(), key.get(), EVP_sha256());
  auto to_pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(n));
    BIO_free(bio);
    return out;
  };
  std::string cert_pem = to_pem([&](BIO* b) { PEM_write_bio_X509(b, cert.get()); });
  std::string key_pem =
      to_pem([&](BIO* b) { PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  return {cert_pem, key_pem};
}

tls_settings base_settings() {
  tls_settings tls;
  tls.listener_name = "SSL";
  tls.keystore_type = "PEM";
  tls.truststore_type = "PEM";
  tls.enabled_protocols = {"TLSv1.2", "TLSv1.3"};
  tls.protocol = "TLSv1.3";
  tls.principal_mapping_rules = "DEFAULT";
  return tls;
}

std::shared_ptr<tls_listener_context> listener_with(const std::pair<std::string, std::string>& pem) {
  auto tls = base_settings();
  tls.keystore_certificate_chain = pem.first;
  tls.keystore_key = pem.second;
  auto made = make_tls_listener_context(tls);
  EXPECT_TRUE(made.ok()) << (made.ok() ? "" : made.error().message);
  return made.ok() ? *made : nullptr;
}

TEST(tls_test, a_key_store_update_keeps_the_subject_and_the_subject_alt_names) {
  auto current = listener_with(self_signed({{"CN", "broker"}}, 0, "DNS:localhost,IP:127.0.0.1"));
  auto renewed = listener_with(self_signed({{"CN", "BROKER"}}, 0, "DNS:localhost,IP:127.0.0.1,DNS:extra"));
  auto renamed = listener_with(self_signed({{"CN", "other"}}, 0, "DNS:localhost,IP:127.0.0.1"));
  auto narrower = listener_with(self_signed({{"CN", "broker"}}, 0, "DNS:localhost"));
  ASSERT_TRUE(current && renewed && renamed && narrower);
  auto before = listener_certificate_identity(*current);
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->subject, "CN=broker");
  EXPECT_EQ(before->subject_alt_names, (std::set<std::string>{"DNS:localhost", "IP:127.0.0.1"}));
  // The same DN (compared ignoring case) with more names: allowed.
  EXPECT_TRUE(check_certificate_update(*before, *listener_certificate_identity(*renewed), false, false).ok());
  // Another DN: refused with Kafka's message unless ssl.allow.dn.changes.
  auto dn = check_certificate_update(*before, *listener_certificate_identity(*renamed), false, false);
  ASSERT_FALSE(dn.ok());
  EXPECT_EQ(dn.code, error_code::invalid_config);
  EXPECT_EQ(dn.message.rfind("Keystore DistinguishedName does not match", 0), 0u) << dn.message;
  EXPECT_TRUE(check_certificate_update(*before, *listener_certificate_identity(*renamed), true, false).ok());
  // A name dropped: refused unless ssl.allow.san.changes.
  auto san = check_certificate_update(*before, *listener_certificate_identity(*narrower), false, false);
  ASSERT_FALSE(san.ok());
  EXPECT_EQ(san.message.rfind("Keystore SubjectAltNames do not match", 0), 0u) << san.message;
  EXPECT_TRUE(check_certificate_update(*before, *listener_certificate_identity(*narrower), false, true).ok());
  // A certificate without the extension has no names.
  auto bare = listener_with(self_signed({{"CN", "broker"}}));
  ASSERT_TRUE(bare);
  EXPECT_TRUE(listener_certificate_identity(*bare)->subject_alt_names.empty());
}

TEST(tls_test, builds_contexts_and_names_the_key_at_fault) {
  const auto [cert, key] = self_signed({{"CN", "broker"}});
  const auto dir = std::filesystem::temp_directory_path() / ("mala-tls-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto store = dir / "server.pem";
  std::ofstream(store) << key << cert;

  auto tls = base_settings();
  tls.keystore_location = store.string();
  auto ok = make_tls_listener_context(tls);
  EXPECT_TRUE(ok.ok()) << (ok.ok() ? "" : ok.error().message);

  // Inline PEM, as ssl.keystore.certificate.chain / ssl.keystore.key.
  auto inline_tls = base_settings();
  inline_tls.keystore_certificate_chain = cert;
  inline_tls.keystore_key = key;
  inline_tls.truststore_certificates = cert;
  EXPECT_TRUE(make_tls_listener_context(inline_tls).ok());

  auto missing = base_settings();
  missing.keystore_location = (dir / "absent.pem").string();
  auto err = make_tls_listener_context(missing);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().code, error_code::invalid_config);
  EXPECT_EQ(err.error().message.rfind("ssl.keystore.location: ", 0), 0u) << err.error().message;

  // A key of another certificate.
  const auto [other_cert, other_key] = self_signed({{"CN", "other"}});
  auto mismatch = base_settings();
  mismatch.keystore_certificate_chain = cert;
  mismatch.keystore_key = other_key;
  auto mismatch_err = make_tls_listener_context(mismatch);
  ASSERT_FALSE(mismatch_err.ok());
  EXPECT_NE(mismatch_err.error().message.find("does not match"), std::string::npos)
      << mismatch_err.error().message;

  // Overridden per listener: the message names the prefixed key.
  auto overridden = missing;
  overridden.overridden = {"ssl.keystore.location"};
  auto prefixed = make_tls_listener_context(overridden);
  ASSERT_FALSE(prefixed.ok());
  EXPECT_EQ(prefixed.error().message.rfind("listener.name.ssl.ssl.keystore.location: ", 0), 0u)
      << prefixed.error().message;

  auto ciphers = base_settings();
  ciphers.keystore_location = store.string();
  ciphers.cipher_suites = {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"};
  EXPECT_TRUE(make_tls_listener_context(ciphers).ok());
  ciphers.cipher_suites = {"TLS_NOT_A_SUITE"};
  auto bad_cipher = make_tls_listener_context(ciphers);
  ASSERT_FALSE(bad_cipher.ok());
  EXPECT_EQ(bad_cipher.error().message.rfind("ssl.cipher.suites: ", 0), 0u) << bad_cipher.error().message;

  // PKCS12, with ssl.keystore.password.
  {
    BIO* cb = BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size()));
    X509* x = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO* kb = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
    EVP_PKEY* k = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    PKCS12* p12 = PKCS12_create("s3cret", "broker", k, x, nullptr, 0, 0, 0, 0, 0);
    ASSERT_NE(p12, nullptr);
    BIO* out = BIO_new_file((dir / "server.p12").c_str(), "wb");
    i2d_PKCS12_bio(out, p12);
    BIO_free(out);
    PKCS12_free(p12);
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(kb);
    BIO_free(cb);
  }
  auto p12 = base_settings();
  p12.keystore_type = "PKCS12";
  p12.keystore_location = (dir / "server.p12").string();
  p12.keystore_password = "s3cret";
  auto p12_ok = make_tls_listener_context(p12);
  EXPECT_TRUE(p12_ok.ok()) << (p12_ok.ok() ? "" : p12_ok.error().message);
  p12.keystore_password = "wrong";
  auto p12_err = make_tls_listener_context(p12);
  ASSERT_FALSE(p12_err.ok());
  EXPECT_EQ(p12_err.error().message.rfind("ssl.keystore.password: ", 0), 0u) << p12_err.error().message;

  std::filesystem::remove_all(dir);
}

// Answers every request with its own bytes reversed; remembers the principal of the last connection.
class principal_recorder final : public request_dispatcher {
 public:
  asio::awaitable<dispatch_result> dispatch(connection_info& connection, std::span<uint8_t> request,
                                            ordering_point&) override {
    {
      std::lock_guard lock(_mutex);
      _principal = connection.principal_type + ":" + connection.principal_name;
      _zero_copy = connection.zero_copy;
    }
    co_return dispatch_result::respond_with(std::vector<uint8_t>(request.rbegin(), request.rend()));
  }
  std::string principal() {
    std::lock_guard lock(_mutex);
    return _principal;
  }
  bool zero_copy() {
    std::lock_guard lock(_mutex);
    return _zero_copy;
  }

 private:
  std::mutex _mutex;
  std::string _principal;
  bool _zero_copy = true;
};

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{10, 0};  // a hang fails the test instead of blocking it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  return fd;
}

std::vector<uint8_t> frame_of(const std::string& payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> out(4 + payload.size());
  out[0] = static_cast<uint8_t>(n >> 24);
  out[1] = static_cast<uint8_t>(n >> 16);
  out[2] = static_cast<uint8_t>(n >> 8);
  out[3] = static_cast<uint8_t>(n);
  std::memcpy(out.data() + 4, payload.data(), payload.size());
  return out;
}

// A blocking TLS client (OpenSSL) sending `payloads` pipelined and reading their responses; the empty string
// when the server closes (or refuses the handshake) instead.
std::vector<std::string> tls_round_trip(uint16_t port, const std::string& trusted_pem,
                                        const std::string* cert_pem, const std::string* key_pem,
                                        const std::vector<std::string>& payloads) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  {
    BIO* bio = BIO_new_mem_buf(trusted_pem.data(), static_cast<int>(trusted_pem.size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
    X509_free(ca);
    BIO_free(bio);
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (cert_pem) {
    BIO* cb = BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size()));
    X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO* kb = BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    SSL_CTX_use_certificate(ctx.get(), cert);
    SSL_CTX_use_PrivateKey(ctx.get(), key);
    X509_free(cert);
    EVP_PKEY_free(key);
    BIO_free(cb);
    BIO_free(kb);
  }
  const int fd = connect_to(port);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  std::vector<std::string> out;
  if (SSL_connect(ssl.get()) == 1) {
    std::vector<uint8_t> all;
    for (const auto& p : payloads) {
      auto f = frame_of(p);
      all.insert(all.end(), f.begin(), f.end());
    }
    if (SSL_write(ssl.get(), all.data(), static_cast<int>(all.size())) == static_cast<int>(all.size())) {
      auto read_exact = [&](uint8_t* buf, size_t n) {
        size_t got = 0;
        while (got < n) {
          const int r = SSL_read(ssl.get(), buf + got, static_cast<int>(n - got));
          if (r <= 0) return false;
          got += static_cast<size_t>(r);
        }
        return true;
      };
      for (size_t i = 0; i < payloads.size(); ++i) {
        uint8_t prefix[4];
        if (!read_exact(prefix, 4)) break;
        const uint32_t n = (uint32_t{prefix[0]} << 24) | (uint32_t{prefix[1]} << 16) |
                           (uint32_t{prefix[2]} << 8) | uint32_t{prefix[3]};
        std::string body(n, '\0');
        if (!read_exact(reinterpret_cast<uint8_t*>(body.data()), n)) break;
        out.push_back(body);
      }
    }
  }
  ERR_clear_error();
  ::close(fd);
  while (out.size() < payloads.size()) out.emplace_back();
  return out;
}

TEST(tls_test, serves_frames_over_tls_with_the_certificate_principal) {
  // Plain variables, not structured bindings: Clang 14 cannot capture those in the lambdas below.
  std::string server_cert, server_key, client_cert, client_key, rogue_cert, rogue_key, expired_cert,
      expired_key;
  std::tie(server_cert, server_key) = self_signed({{"CN", "localhost"}});
  std::tie(client_cert, client_key) = self_signed({{"O", "acme"}, {"OU", "eng"}, {"CN", "client"}});
  std::tie(rogue_cert, rogue_key) = self_signed({{"CN", "rogue"}});
  std::tie(expired_cert, expired_key) =
      self_signed({{"O", "acme"}, {"OU", "eng"}, {"CN", "client"}}, -7200);  // valid until an hour ago

  auto settings = [&](const char* name, ssl_client_auth auth) {
    auto tls = base_settings();
    tls.listener_name = name;
    tls.keystore_certificate_chain = server_cert;
    tls.keystore_key = server_key;
    tls.truststore_certificates = client_cert + expired_cert;
    tls.client_auth = auth;
    tls.principal_mapping_rules = "RULE:^CN=([^,]+),OU=eng,O=acme$/$1/U,DEFAULT";
    return tls;
  };
  shard_pool shards{2};
  principal_recorder dispatcher;
  kafka_server server(shards, dispatcher, server_limits{});
  auto st = server.listen(
      {{"PLAIN", "127.0.0.1", 0, security_protocol::plaintext, std::nullopt},
       {"ONEWAY", "127.0.0.1", 0, security_protocol::ssl, settings("ONEWAY", ssl_client_auth::none)},
       {"MTLS", "127.0.0.1", 0, security_protocol::ssl, settings("MTLS", ssl_client_auth::required)}});
  ASSERT_TRUE(st.ok()) << st.message;
  shards.start();
  const uint16_t oneway = server.bound_port("ONEWAY");
  const uint16_t mtls = server.bound_port("MTLS");

  // Pipelined frames, small and large (the large ones cross TLS records), answered in order.
  const std::string large(100'000, 'x');
  auto answers = tls_round_trip(oneway, server_cert, nullptr, nullptr, {"abc", large + "y", "de"});
  EXPECT_EQ(answers[0], "cba");
  EXPECT_EQ(answers[1], "y" + large);
  EXPECT_EQ(answers[2], "ed");
  EXPECT_EQ(dispatcher.principal(), "User:ANONYMOUS");
  EXPECT_FALSE(dispatcher.zero_copy());  // sendfile would bypass TLS

  answers = tls_round_trip(mtls, server_cert, &client_cert, &client_key, {"hello"});
  EXPECT_EQ(answers[0], "olleh");
  EXPECT_EQ(dispatcher.principal(), "User:CLIENT");

  // Refused where a trusted, valid certificate is required: none, an untrusted one, an expired one.
  EXPECT_EQ(tls_round_trip(mtls, server_cert, nullptr, nullptr, {"x"})[0], "");
  EXPECT_EQ(tls_round_trip(mtls, server_cert, &rogue_cert, &rogue_key, {"x"})[0], "");
  EXPECT_EQ(tls_round_trip(mtls, server_cert, &expired_cert, &expired_key, {"x"})[0], "");

  // Plaintext on a TLS listener: closed without an answer.
  {
    const int fd = connect_to(oneway);
    const auto f = frame_of("plain");
    ASSERT_EQ(::send(fd, f.data(), f.size(), 0), static_cast<ssize_t>(f.size()));
    uint8_t buf[4096];
    ssize_t n = 0;
    ssize_t total = 0;
    bool alert_only = true;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
      if (total == 0 && buf[0] != 0x15) alert_only = false;  // at most a TLS alert record
      total += n;
    }
    EXPECT_EQ(n, 0) << "the connection was not closed";
    EXPECT_TRUE(alert_only);
    ::close(fd);
  }
  // The listeners still serve.
  EXPECT_EQ(tls_round_trip(mtls, server_cert, &client_cert, &client_key, {"ok"})[0], "ko");
  EXPECT_EQ(tls_round_trip(oneway, server_cert, nullptr, nullptr, {"ok"})[0], "ko");

  // A new key store at run time: new connections get the new certificate; a store that cannot be loaded
  // leaves the one in use.
  const auto [renewed_cert, renewed_key] = self_signed({{"CN", "localhost"}});
  auto renewed = settings("ONEWAY", ssl_client_auth::none);
  renewed.keystore_certificate_chain = renewed_cert;
  renewed.keystore_key = renewed_key;
  ASSERT_TRUE(server.reload_tls(renewed).ok());
  EXPECT_EQ(tls_round_trip(oneway, renewed_cert, nullptr, nullptr, {"new"})[0], "wen");
  EXPECT_EQ(tls_round_trip(oneway, server_cert, nullptr, nullptr, {"old"})[0], "");
  auto broken = renewed;
  broken.keystore_key = rogue_key;
  auto refused = server.reload_tls(broken);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(tls_round_trip(oneway, renewed_cert, nullptr, nullptr, {"still"})[0], "llits");
  EXPECT_FALSE(server.reload_tls(settings("PLAIN", ssl_client_auth::none)).ok());

  shards.stop();
  shards.join();
  server.stop();
}

// A connection that never completes its handshake is closed after tls_handshake_timeout_ms.
TEST(tls_test, bounds_the_handshake) {
  const auto [server_cert, server_key] = self_signed({{"CN", "localhost"}});
  auto tls = base_settings();
  tls.keystore_certificate_chain = server_cert;
  tls.keystore_key = server_key;
  shard_pool shards{1};
  principal_recorder dispatcher;
  server_limits limits;
  limits.tls_handshake_timeout_ms = 300;
  kafka_server server(shards, dispatcher, limits);
  ASSERT_TRUE(server.listen({{"SSL", "127.0.0.1", 0, security_protocol::ssl, tls}}).ok());
  shards.start();
  const int fd = connect_to(server.bound_port("SSL"));
  const auto start = std::chrono::steady_clock::now();
  uint8_t buf[64];
  const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);  // silent client: the server closes
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(n, 0);
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_LT(waited, std::chrono::seconds(5));
  ::close(fd);
  shards.stop();
  shards.join();
  server.stop();
}

// One TLS handshake on loopback between a listener's server context and a node's client context connecting
// as if to `host` (the TCP connection goes to 127.0.0.1 whatever the name): whether each side succeeded.
struct handshake_outcome {
  bool client_ok = false;
  bool server_ok = false;
};

handshake_outcome handshake(tls_listener_context& server, tls_client_context& client,
                            const std::string& host) {
  using asio::ip::tcp;
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  handshake_outcome out;
  std::thread server_side([&] {
    asio::io_context sio;
    tcp::socket s(sio);
    acceptor.accept(s);
    asio::ssl::stream<tcp::socket&> stream(s, server.context);
    std::error_code ec;
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (!ec) {
      // TLS 1.3 completes the client's handshake before the server checked its certificate: the server
      // answers one byte once it accepted the client.
      uint8_t b = 0;
      asio::read(stream, asio::buffer(&b, 1), ec);
      if (!ec) asio::write(stream, asio::buffer(&b, 1), ec);
    }
    out.server_ok = !ec;
    s.close(ec);
  });
  tcp::socket c(io);
  std::error_code ec;
  c.connect(acceptor.local_endpoint(), ec);
  const auto client_context = client.current();
  asio::ssl::stream<tcp::socket&> stream(c, *client_context);
  if (!prepare_tls_client_connection(client, stream.native_handle(), host)) {
    c.close(ec);
    server_side.join();
    return out;
  }
  stream.handshake(asio::ssl::stream_base::client, ec);
  if (!ec) {
    uint8_t b = 7;
    asio::write(stream, asio::buffer(&b, 1), ec);
    if (!ec) asio::read(stream, asio::buffer(&b, 1), ec);
  }
  out.client_ok = !ec;
  c.close(ec);
  server_side.join();
  return out;
}

// The client side of inter-broker / controller connections: the server verified against the trust store,
// its name checked with ssl.endpoint.identification.algorithm=https and not with an empty one, the key store
// presented as the client certificate.
TEST(tls_test, client_context_verifies_the_server_and_presents_its_certificate) {
  // Plain variables, not structured bindings: Clang 14 cannot capture those in the lambdas below.
  std::string server_cert, server_key, node_cert, node_key, rogue_cert, rogue_key;
  std::tie(server_cert, server_key) = self_signed({{"CN", "localhost"}});
  std::tie(node_cert, node_key) = self_signed({{"CN", "broker-2"}});
  std::tie(rogue_cert, rogue_key) = self_signed({{"CN", "localhost"}});

  auto server_settings = base_settings();
  server_settings.keystore_certificate_chain = server_cert;
  server_settings.keystore_key = server_key;
  server_settings.truststore_certificates = node_cert;
  server_settings.client_auth = ssl_client_auth::required;
  auto server = make_tls_listener_context(server_settings);
  ASSERT_TRUE(server.ok()) << server.error().message;

  auto client_settings = [&](bool with_key_store, const std::string& trusted, const std::string& algorithm) {
    auto tls = base_settings();
    if (with_key_store) {
      tls.keystore_certificate_chain = node_cert;
      tls.keystore_key = node_key;
    }
    tls.truststore_certificates = trusted;
    tls.endpoint_identification_algorithm = algorithm;
    auto made = make_tls_client_context(tls);
    EXPECT_TRUE(made.ok()) << made.error().message;
    return made.value();
  };

  // Trusted server, name matching, client certificate: accepted both ways.
  auto https = client_settings(true, server_cert, "https");
  EXPECT_TRUE(https->verify_hostname);
  auto r = handshake(**server, *https, "localhost");
  EXPECT_TRUE(r.client_ok);
  EXPECT_TRUE(r.server_ok);
  // Hostname verification on: a server certificate for another name is refused by the client.
  r = handshake(**server, *https, "broker-9.example");
  EXPECT_FALSE(r.client_ok);
  EXPECT_FALSE(r.server_ok);
  r = handshake(**server, *https, "127.0.0.2");  // an IP address must be in the certificate too
  EXPECT_FALSE(r.client_ok);
  // Hostname verification off: the same name mismatch is accepted.
  auto none = client_settings(true, server_cert, "");
  EXPECT_FALSE(none->verify_hostname);
  r = handshake(**server, *none, "broker-9.example");
  EXPECT_TRUE(r.client_ok);
  EXPECT_TRUE(r.server_ok);
  // An untrusted server (same name, another key) is refused even without hostname verification.
  auto untrusting = client_settings(true, rogue_cert, "");
  r = handshake(**server, *untrusting, "localhost");
  EXPECT_FALSE(r.client_ok);
  EXPECT_FALSE(r.server_ok);
  // No key store: no client certificate, refused by a server that requires one.
  auto anonymous = client_settings(false, server_cert, "https");
  r = handshake(**server, *anonymous, "localhost");
  EXPECT_FALSE(r.client_ok);
  EXPECT_FALSE(r.server_ok);

  // A key store update at run time swaps the SSL context: the next connection presents the new certificate.
  auto updated = client_settings(false, server_cert, "https");
  EXPECT_FALSE(handshake(**server, *updated, "localhost").server_ok);
  updated->replace(https->current());
  r = handshake(**server, *updated, "localhost");
  EXPECT_TRUE(r.client_ok);
  EXPECT_TRUE(r.server_ok);

  // An algorithm Kafka does not know fails with the key named.
  auto bad = base_settings();
  bad.truststore_certificates = server_cert;
  bad.endpoint_identification_algorithm = "ldap";
  auto refused = make_tls_client_context(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("ssl.endpoint.identification.algorithm"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace mala::net
