#include "mala/net/tls.h"

#include <asio/ip/address.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509v3.h>

namespace mala::net {

namespace {

template <typename T, void (*Free)(T*)>
struct openssl_deleter {
  void operator()(T* p) const { Free(p); }
};
using bio_ptr = std::unique_ptr<BIO, openssl_deleter<BIO, BIO_free_all>>;
using x509_ptr = std::unique_ptr<X509, openssl_deleter<X509, X509_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, openssl_deleter<EVP_PKEY, EVP_PKEY_free>>;
using pkcs12_ptr = std::unique_ptr<PKCS12, openssl_deleter<PKCS12, PKCS12_free>>;
using ssl_ptr = std::unique_ptr<SSL, openssl_deleter<SSL, SSL_free>>;

status config_failure(const tls_settings& tls, std::string_view base_key, std::string message) {
  return status::error(error_code::invalid_config,
                       tls.key_name(base_key) + ": " + message + " (listener " + tls.listener_name + ")");
}

// The contents of a key or trust store, read whole (they are small) so that a missing file is reported as
// such rather than as a PEM parse failure.
result<std::string> read_store(const tls_settings& tls, std::string_view key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return config_failure(tls, key, "cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bio_ptr memory_bio(const std::string& bytes) {
  return bio_ptr(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
}

int password_callback(char* buf, int size, int /*rwflag*/, void* user) {
  const auto* password = static_cast<const std::string*>(user);
  if (password == nullptr || password->empty() || size <= 0) return 0;
  const int n = std::min(size, static_cast<int>(password->size()));
  std::memcpy(buf, password->data(), static_cast<size_t>(n));
  return n;
}

std::vector<x509_ptr> read_pem_certificates(const std::string& pem) {
  std::vector<x509_ptr> certs;
  auto bio = memory_bio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(cert);
  ERR_clear_error();  // the end of the input reads as "no start line"
  return certs;
}

struct key_material {
  pkey_ptr key;
  std::vector<x509_ptr> chain;  // the leaf first
};

result<key_material> load_pem_key_store(const tls_settings& tls, const std::string& pem,
                                        std::string_view source_key, std::string_view cert_key) {
  key_material out;
  out.chain = read_pem_certificates(pem);
  if (out.chain.empty()) return config_failure(tls, cert_key, "no PEM certificate found");
  auto bio = memory_bio(pem);
  std::string password = tls.key_password.value_or("");
  out.key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, password_callback, &password));
  if (!out.key) {
    const auto reason = openssl_error_reason("no PEM private key found");
    const bool encrypted = pem.find("ENCRYPTED") != std::string::npos;
    if (encrypted) {
      return config_failure(tls, "ssl.key.password",
                            "cannot decrypt the private key of " + tls.key_name(source_key) + ": " + reason);
    }
    return config_failure(tls, source_key, "cannot read the private key: " + reason);
  }
  return out;
}

result<key_material> load_pkcs12(const tls_settings& tls, const std::string& bytes, std::string_view key,
                                 std::string_view password_key, const std::optional<std::string>& password,
                                 bool need_key) {
  auto bio = memory_bio(bytes);
  pkcs12_ptr p12(d2i_PKCS12_bio(bio.get(), nullptr));
  if (!p12) return config_failure(tls, key, "not a PKCS12 file: " + openssl_error_reason("parse error"));
  EVP_PKEY* pkey = nullptr;
  X509* cert = nullptr;
  STACK_OF(X509)* ca = nullptr;
  if (PKCS12_parse(p12.get(), password ? password->c_str() : nullptr, &pkey, &cert, &ca) != 1) {
    return config_failure(
        tls, password_key,
        "cannot open the PKCS12 store " + tls.key_name(key) + ": " + openssl_error_reason("wrong password?"));
  }
  key_material out;
  out.key.reset(pkey);
  if (cert) out.chain.emplace_back(cert);
  if (ca) {
    for (int i = 0; i < sk_X509_num(ca); ++i) out.chain.emplace_back(sk_X509_value(ca, i));
    sk_X509_free(ca);  // the certificates are owned by `out` now
  }
  if (need_key && (!out.key || !cert))
    return config_failure(tls, key, "no private key and certificate in it");
  return out;
}

status load_key_store(const tls_settings& tls, SSL_CTX* ctx) {
  result<key_material> material = status::success();
  if (tls.keystore_location) {
    auto bytes = read_store(tls, "ssl.keystore.location", *tls.keystore_location);
    if (!bytes.ok()) return bytes.error();
    material = tls.keystore_type == "PKCS12"
                   ? load_pkcs12(tls, *bytes, "ssl.keystore.location", "ssl.keystore.password",
                                 tls.keystore_password, true)
                   : load_pem_key_store(tls, *bytes, "ssl.keystore.location", "ssl.keystore.location");
  } else {
    material = load_pem_key_store(tls, *tls.keystore_key + "\n" + *tls.keystore_certificate_chain,
                                  "ssl.keystore.key", "ssl.keystore.certificate.chain");
  }
  if (!material.ok()) return material.error();
  const std::string_view where = tls.keystore_location ? "ssl.keystore.location" : "ssl.keystore.key";
  if (SSL_CTX_use_certificate(ctx, material->chain.front().get()) != 1) {
    return config_failure(tls, where, "certificate refused: " + openssl_error_reason("unknown reason"));
  }
  for (size_t i = 1; i < material->chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, material->chain[i].get()) != 1) {
      return config_failure(tls, where,
                            "chain certificate refused: " + openssl_error_reason("unknown reason"));
    }
  }
  if (SSL_CTX_use_PrivateKey(ctx, material->key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return config_failure(
        tls, where, "the private key does not match the certificate: " + openssl_error_reason("mismatch"));
  }
  return status::success();
}

status load_trust_store(const tls_settings& tls, SSL_CTX* ctx) {
  std::vector<x509_ptr> trusted;
  if (tls.truststore_location) {
    auto bytes = read_store(tls, "ssl.truststore.location", *tls.truststore_location);
    if (!bytes.ok()) return bytes.error();
    if (tls.truststore_type == "PKCS12") {
      auto material = load_pkcs12(tls, *bytes, "ssl.truststore.location", "ssl.truststore.password",
                                  tls.truststore_password, false);
      if (!material.ok()) return material.error();
      trusted = std::move(material->chain);
    } else {
      trusted = read_pem_certificates(*bytes);
    }
    if (trusted.empty()) return config_failure(tls, "ssl.truststore.location", "no certificate found");
  } else if (tls.truststore_certificates) {
    trusted = read_pem_certificates(*tls.truststore_certificates);
    if (trusted.empty())
      return config_failure(tls, "ssl.truststore.certificates", "no PEM certificate found");
  } else {
    // Kafka falls back on the JVM's default trust store; OpenSSL's default CA paths are the equivalent.
    SSL_CTX_set_default_verify_paths(ctx);
    return status::success();
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (const auto& cert : trusted) {
    X509_STORE_add_cert(store, cert.get());
    // The CA names sent in the CertificateRequest: clients pick the certificate those issued.
    SSL_CTX_add_client_CA(ctx, cert.get());
  }
  ERR_clear_error();  // a certificate listed twice is not an error
  return status::success();
}

int protocol_version(const std::string& name) {
  static const std::map<std::string, int, std::less<>> versions = {{"TLSv1", TLS1_VERSION},
                                                                   {"TLSv1.1", TLS1_1_VERSION},
                                                                   {"TLSv1.2", TLS1_2_VERSION},
                                                                   {"TLSv1.3", TLS1_3_VERSION}};
  auto it = versions.find(name);
  return it == versions.end() ? 0 : it->second;
}

status set_protocols(const tls_settings& tls, SSL_CTX* ctx) {
  int low = 0;
  int high = 0;
  std::set<int> enabled;
  for (const auto& p : tls.enabled_protocols) {
    const int v = protocol_version(p);
    if (v == 0) return config_failure(tls, "ssl.enabled.protocols", "unsupported protocol '" + p + "'");
    enabled.insert(v);
    low = low == 0 ? v : std::min(low, v);
    high = std::max(high, v);
  }
  SSL_CTX_set_min_proto_version(ctx, low);
  SSL_CTX_set_max_proto_version(ctx, high);
  // Versions between the lowest and the highest that are not enabled.
  const std::pair<int, uint64_t> gaps[] = {{TLS1_1_VERSION, SSL_OP_NO_TLSv1_1},
                                           {TLS1_2_VERSION, SSL_OP_NO_TLSv1_2}};
  for (const auto& [version, option] : gaps) {
    if (version > low && version < high && !enabled.contains(version)) SSL_CTX_set_options(ctx, option);
  }
  return status::success();
}

// ssl.cipher.suites by IANA names (as Java's) or OpenSSL's: TLS 1.3 suites go to SSL_CTX_set_ciphersuites,
// the others to the cipher list. A version left without a suite is disabled.
status set_cipher_suites(const tls_settings& tls, SSL_CTX* ctx) {
  if (tls.cipher_suites.empty()) return status::success();
  ssl_ptr probe(SSL_new(ctx));
  // Every cipher OpenSSL knows, to translate IANA names.
  SSL_set_cipher_list(probe.get(), "ALL:COMPLEMENTOFALL");
  std::map<std::string, std::string, std::less<>> by_standard_name;
  std::set<std::string, std::less<>> openssl_names;
  STACK_OF(SSL_CIPHER)* all = SSL_get_ciphers(probe.get());
  for (int i = 0; i < sk_SSL_CIPHER_num(all); ++i) {
    const SSL_CIPHER* c = sk_SSL_CIPHER_value(all, i);
    by_standard_name[SSL_CIPHER_standard_name(c)] = SSL_CIPHER_get_name(c);
    openssl_names.insert(SSL_CIPHER_get_name(c));
  }
  static const std::set<std::string, std::less<>> tls13 = {
      "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
      "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"};
  std::string list12;
  std::string list13;
  for (const auto& suite : tls.cipher_suites) {
    if (tls13.contains(suite)) {
      list13 += (list13.empty() ? "" : ":") + suite;
    } else if (auto it = by_standard_name.find(suite); it != by_standard_name.end()) {
      list12 += (list12.empty() ? "" : ":") + it->second;
    } else if (openssl_names.contains(suite)) {
      list12 += (list12.empty() ? "" : ":") + suite;
    } else {
      return config_failure(tls, "ssl.cipher.suites", "unknown cipher suite '" + suite + "'");
    }
  }
  if (SSL_CTX_set_ciphersuites(ctx, list13.c_str()) != 1) {
    return config_failure(tls, "ssl.cipher.suites", "refused: " + openssl_error_reason("unknown reason"));
  }
  if (list12.empty()) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 | SSL_OP_NO_TLSv1_2);
  } else if (SSL_CTX_set_cipher_list(ctx, list12.c_str()) != 1) {
    return config_failure(tls, "ssl.cipher.suites", "refused: " + openssl_error_reason("unknown reason"));
  }
  if (list13.empty()) SSL_CTX_set_options(ctx, SSL_OP_NO_TLSv1_3);
  return status::success();
}

// Java's keywords for RFC 2253 names (sun.security.x509.AVAKeyword, rfc2253Compliant); other attributes are
// written by OID.
const char* java_rfc2253_keyword(int nid) {
  switch (nid) {
    case NID_commonName:
      return "CN";
    case NID_countryName:
      return "C";
    case NID_localityName:
      return "L";
    case NID_stateOrProvinceName:
      return "ST";
    case NID_organizationName:
      return "O";
    case NID_organizationalUnitName:
      return "OU";
    case NID_streetAddress:
      return "STREET";
    case NID_domainComponent:
      return "DC";
    case NID_userId:
      return "UID";
    default:
      return nullptr;
  }
}

// The string types Java writes as text (DerValue tags it treats as strings); others are dumped in hex.
bool is_string_type(int type) {
  switch (type) {
    case V_ASN1_PRINTABLESTRING:
    case V_ASN1_T61STRING:
    case V_ASN1_IA5STRING:
    case V_ASN1_GENERALSTRING:
    case V_ASN1_UTF8STRING:
    case V_ASN1_BMPSTRING:
    case V_ASN1_UNIVERSALSTRING:
      return true;
    default:
      return false;
  }
}

std::string hex_der(const ASN1_STRING* value) {
  // DER of the value: its universal tag, length, contents.
  std::string der;
  der += static_cast<char>(ASN1_STRING_type(value) & 0x1f);
  const auto length = static_cast<size_t>(ASN1_STRING_length(value));
  if (length < 0x80) {
    der += static_cast<char>(length);
  } else {
    std::string bytes;
    for (size_t n = length; n > 0; n >>= 8) bytes.insert(bytes.begin(), static_cast<char>(n & 0xff));
    der += static_cast<char>(0x80 | bytes.size());
    der += bytes;
  }
  der.append(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)), length);
  static const char digits[] = "0123456789abcdef";
  std::string out = "#";
  for (unsigned char c : der) {
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

// AVA.toRFC2253String's escaping of a value.
std::string escape_rfc2253(const std::string& value) {
  static constexpr std::string_view escapees = ",=+<>#;\"\\";
  std::string escaped;
  for (char c : value) {
    if (escapees.find(c) != std::string_view::npos) {
      escaped += '\\';
      escaped += c;
    } else if (c == '\0') {
      escaped += "\\00";
    } else {
      escaped += c;
    }
  }
  // Leading and trailing spaces (and carriage returns) are escaped too.
  size_t lead = 0;
  while (lead < escaped.size() && (escaped[lead] == ' ' || escaped[lead] == '\r')) ++lead;
  size_t trail = escaped.size();
  while (trail > lead && (escaped[trail - 1] == ' ' || escaped[trail - 1] == '\r')) --trail;
  std::string out;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (i < lead || i >= trail) out += '\\';
    out += escaped[i];
  }
  return out;
}

std::string format_attribute(const X509_NAME_ENTRY* entry) {
  const ASN1_OBJECT* object = X509_NAME_ENTRY_get_object(entry);
  const ASN1_STRING* value = X509_NAME_ENTRY_get_data(entry);
  const char* keyword = java_rfc2253_keyword(OBJ_obj2nid(object));
  if (keyword == nullptr || !is_string_type(ASN1_STRING_type(value))) {
    char oid[128];
    OBJ_obj2txt(oid, sizeof(oid), object, 1);
    return std::string(keyword ? keyword : oid) + "=" + hex_der(value);
  }
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, value);
  if (n < 0) return std::string(keyword) + "=" + hex_der(value);
  std::string text(reinterpret_cast<const char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return std::string(keyword) + "=" + escape_rfc2253(text);
}

}  // namespace

std::optional<certificate_identity> listener_certificate_identity(const tls_listener_context& listener) {
  // The leaf of the key store's chain, as the context serves it.
  X509* cert = SSL_CTX_get0_certificate(const_cast<asio::ssl::context&>(listener.context).native_handle());
  if (!cert) return std::nullopt;
  certificate_identity identity;
  identity.subject = format_x500_name(X509_get_subject_name(cert));
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return identity;
  auto text_of = [](const ASN1_STRING* value) {
    return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                       static_cast<size_t>(ASN1_STRING_length(value)));
  };
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    switch (name->type) {
      case GEN_DNS:
        identity.subject_alt_names.insert("DNS:" + text_of(name->d.dNSName));
        break;
      case GEN_URI:
        identity.subject_alt_names.insert("URI:" + text_of(name->d.uniformResourceIdentifier));
        break;
      case GEN_EMAIL:
        identity.subject_alt_names.insert("email:" + text_of(name->d.rfc822Name));
        break;
      case GEN_IPADD: {
        const std::string bytes = text_of(name->d.iPAddress);
        std::string address;
        if (bytes.size() == 4) {
          asio::ip::address_v4::bytes_type b;
          std::copy(bytes.begin(), bytes.end(), b.begin());
          address = asio::ip::address_v4(b).to_string();
        } else if (bytes.size() == 16) {
          asio::ip::address_v6::bytes_type b;
          std::copy(bytes.begin(), bytes.end(), b.begin());
          address = asio::ip::address_v6(b).to_string();
        }
        if (!address.empty()) identity.subject_alt_names.insert("IP:" + address);
        break;
      }
      default: {
        // Other kinds (directory names, other names, registered ids) by their DER bytes.
        unsigned char* der = nullptr;
        const int length = i2d_GENERAL_NAME(const_cast<GENERAL_NAME*>(name), &der);
        if (length > 0) {
          static constexpr char hex[] = "0123456789abcdef";
          std::string text = "type" + std::to_string(name->type) + ":";
          for (int k = 0; k < length; ++k) {
            text.push_back(hex[der[k] >> 4]);
            text.push_back(hex[der[k] & 0xf]);
          }
          identity.subject_alt_names.insert(std::move(text));
        }
        OPENSSL_free(der);
        break;
      }
    }
  }
  GENERAL_NAMES_free(names);
  return identity;
}

status check_certificate_update(const certificate_identity& current, const certificate_identity& next,
                                bool allow_dn_changes, bool allow_san_changes) {
  auto lower = [](std::string text) {
    for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  if (!allow_dn_changes && lower(current.subject) != lower(next.subject)) {
    return status::error(error_code::invalid_config,
                         "Keystore DistinguishedName does not match: existing={DN=" + current.subject +
                             "}, new={DN=" + next.subject + "}");
  }
  if (!allow_san_changes &&
      !std::includes(next.subject_alt_names.begin(), next.subject_alt_names.end(),
                     current.subject_alt_names.begin(), current.subject_alt_names.end())) {
    auto list = [](const std::set<std::string>& names) {
      std::string out;
      for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
      return "[" + out + "]";
    };
    return status::error(error_code::invalid_config, "Keystore SubjectAltNames do not match: existing={SAN=" +
                                                         list(current.subject_alt_names) +
                                                         "}, new={SAN=" + list(next.subject_alt_names) + "}");
  }
  return status::success();
}

std::string openssl_error_reason(std::string fallback) {
  std::string reason;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    reason = buf;  // the last one queued is the closest to the cause reported
  }
  return reason.empty() ? fallback : reason;
}

std::string format_x500_name(const X509_NAME* name) {
  // Entries are in ASN.1 order (least specific RDN first); RFC 2253 writes the RDNs the other way round, the
  // attributes of a multi-valued RDN in their encoded order (as Java's RDN.toRFC2253String).
  std::vector<std::vector<const X509_NAME_ENTRY*>> rdns;
  int previous_set = -1;
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* entry = X509_NAME_get_entry(name, i);
    const int set = X509_NAME_ENTRY_set(entry);
    if (rdns.empty() || set != previous_set) rdns.emplace_back();
    rdns.back().push_back(entry);
    previous_set = set;
  }
  std::string out;
  for (auto rdn = rdns.rbegin(); rdn != rdns.rend(); ++rdn) {
    if (!out.empty()) out += ',';
    for (size_t i = 0; i < rdn->size(); ++i) {
      if (i > 0) out += '+';
      out += format_attribute((*rdn)[i]);
    }
  }
  return out;
}

result<std::shared_ptr<tls_listener_context>> make_tls_listener_context(const tls_settings& settings) {
  auto listener = std::make_shared<tls_listener_context>();
  listener->listener_name = settings.listener_name;
  listener->client_auth = settings.client_auth;
  auto mapper = ssl_principal_mapper::parse(settings.principal_mapping_rules);
  if (!mapper.ok()) return config_failure(settings, "ssl.principal.mapping.rules", mapper.error().message);
  listener->principal_mapper = std::move(*mapper);
  SSL_CTX* ctx = listener->context.native_handle();
  ERR_clear_error();
  if (auto st = set_protocols(settings, ctx); !st.ok()) return st;
  if (auto st = load_key_store(settings, ctx); !st.ok()) return st;
  if (auto st = load_trust_store(settings, ctx); !st.ok()) return st;
  if (auto st = set_cipher_suites(settings, ctx); !st.ok()) return st;
  int verify = SSL_VERIFY_NONE;
  if (settings.client_auth == ssl_client_auth::requested) verify = SSL_VERIFY_PEER;
  if (settings.client_auth == ssl_client_auth::required)
    verify = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  SSL_CTX_set_verify(ctx, verify, nullptr);
  // Sessions resumed with client authentication need an id context (else the resumption fails).
  const std::string id = "mala:" + settings.listener_name;
  SSL_CTX_set_session_id_context(
      ctx, reinterpret_cast<const unsigned char*>(id.data()),
      static_cast<unsigned int>(std::min<size_t>(id.size(), SSL_MAX_SID_CTX_LENGTH)));
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  return listener;
}

result<std::shared_ptr<tls_client_context>> make_tls_client_context(const tls_settings& settings) {
  auto client = std::make_shared<tls_client_context>();
  client->listener_name = settings.listener_name;
  const std::string algorithm = settings.endpoint_identification_algorithm;
  if (!algorithm.empty() && algorithm != "https" && algorithm != "HTTPS") {
    return config_failure(settings, "ssl.endpoint.identification.algorithm",
                          "unsupported algorithm '" + algorithm + "' (https or empty)");
  }
  client->verify_hostname = !algorithm.empty();
  SSL_CTX* ctx = client->current()->native_handle();
  ERR_clear_error();
  if (auto st = set_protocols(settings, ctx); !st.ok()) return st;
  // The key store is optional on the client side: without one the client presents no certificate.
  if (settings.keystore_location || (settings.keystore_key && settings.keystore_certificate_chain)) {
    if (auto st = load_key_store(settings, ctx); !st.ok()) return st;
  }
  if (auto st = load_trust_store(settings, ctx); !st.ok()) return st;
  if (auto st = set_cipher_suites(settings, ctx); !st.ok()) return st;
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  return client;
}

std::shared_ptr<asio::ssl::context> tls_client_context::current() const {
  std::lock_guard lock(_mutex);
  return _context;
}

void tls_client_context::replace(std::shared_ptr<asio::ssl::context> next) {
  std::lock_guard lock(_mutex);
  _context = std::move(next);
}

bool prepare_tls_client_connection(const tls_client_context& client, SSL* ssl, const std::string& host) {
  std::error_code ec;
  (void)asio::ip::make_address(host, ec);
  const bool is_ip = !ec;
  // SNI carries host names only (RFC 6066).
  if (!is_ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) return false;
  if (!client.verify_hostname) return true;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (is_ip) return X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1;
  // Subject alternative names only, as Java's HTTPS endpoint identification (no CN fallback when SANs exist).
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size()) == 1;
}

std::optional<std::string> tls_peer_principal(const tls_listener_context& listener, SSL* ssl,
                                              std::string& dn) {
  x509_ptr cert(SSL_get1_peer_certificate(ssl));
  if (!cert) {
    dn.clear();
    return std::string("ANONYMOUS");
  }
  dn = format_x500_name(X509_get_subject_name(cert.get()));
  return listener.principal_mapper.map(dn);
}

}  // namespace mala::net
