#include "mala/security/jwt.h"

#include <algorithm>
#include <cmath>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include "mala/common/json.h"

namespace mala::security {

struct json_web_key {
  std::string kid;
  bool has_kid = false;
  std::string kty;  // "RSA" or "EC"
  std::string alg;  // empty: any
  std::string use;  // empty: any
  std::string crv;  // EC: "P-256", "P-384", "P-521"
  int bits = 0;     // RSA modulus size
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key{nullptr, EVP_PKEY_free};
};

namespace {

constexpr size_t max_jwks_bytes = 1 << 20;
constexpr size_t max_keys = 1000;
constexpr size_t max_token_bytes = 64 * 1024;

struct algorithm {
  std::string_view name;
  std::string_view kty;
  const EVP_MD* (*md)();
  bool pss = false;
  std::string_view crv;  // ES*: the curve
  size_t ec_part = 0;    // ES*: bytes of r and of s
};

constexpr algorithm algorithms[] = {
    {"RS256", "RSA", EVP_sha256, false, "", 0},      {"RS384", "RSA", EVP_sha384, false, "", 0},
    {"RS512", "RSA", EVP_sha512, false, "", 0},      {"PS256", "RSA", EVP_sha256, true, "", 0},
    {"PS384", "RSA", EVP_sha384, true, "", 0},       {"PS512", "RSA", EVP_sha512, true, "", 0},
    {"ES256", "EC", EVP_sha256, false, "P-256", 32}, {"ES384", "EC", EVP_sha384, false, "P-384", 48},
    {"ES512", "EC", EVP_sha512, false, "P-521", 66},
};

const algorithm* find_algorithm(std::string_view name) {
  for (const auto& a : algorithms) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string string_member(const json::value& object, std::string_view key) {
  const auto* v = object.find(key);
  return v != nullptr && v->as_string() != nullptr ? *v->as_string() : std::string();
}

using bignum_ptr = std::unique_ptr<BIGNUM, decltype(&BN_free)>;
using param_bld_ptr = std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)>;
using params_ptr = std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)>;
using pkey_ctx_ptr = std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)>;

EVP_PKEY* key_from_params(const char* type, OSSL_PARAM_BLD* bld) {
  params_ptr params(OSSL_PARAM_BLD_to_param(bld), OSSL_PARAM_free);
  if (!params) return nullptr;
  pkey_ctx_ptr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* key = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) <= 0 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) <= 0) {
    ERR_clear_error();
    return nullptr;
  }
  return key;
}

EVP_PKEY* rsa_key(const std::vector<uint8_t>& n, const std::vector<uint8_t>& e) {
  bignum_ptr bn_n(BN_bin2bn(n.data(), static_cast<int>(n.size()), nullptr), BN_free);
  bignum_ptr bn_e(BN_bin2bn(e.data(), static_cast<int>(e.size()), nullptr), BN_free);
  param_bld_ptr bld(OSSL_PARAM_BLD_new(), OSSL_PARAM_BLD_free);
  if (!bn_n || !bn_e || !bld || !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get())) {
    return nullptr;
  }
  return key_from_params("RSA", bld.get());
}

EVP_PKEY* ec_key(std::string_view crv, const std::vector<uint8_t>& x, const std::vector<uint8_t>& y) {
  const char* group = crv == "P-256" ? "prime256v1" : crv == "P-384" ? "secp384r1" : "secp521r1";
  const size_t size = crv == "P-256" ? 32 : crv == "P-384" ? 48 : 66;
  if (x.size() != size || y.size() != size) return nullptr;
  std::vector<uint8_t> point{0x04};
  point.insert(point.end(), x.begin(), x.end());
  point.insert(point.end(), y.begin(), y.end());
  param_bld_ptr bld(OSSL_PARAM_BLD_new(), OSSL_PARAM_BLD_free);
  if (!bld || !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, group, 0) ||
      !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size())) {
    return nullptr;
  }
  return key_from_params("EC", bld.get());
}

std::unique_ptr<json_web_key> parse_key(const json::value& v) {
  if (v.as_object() == nullptr) return nullptr;
  auto out = std::make_unique<json_web_key>();
  out->kty = string_member(v, "kty");
  out->alg = string_member(v, "alg");
  out->use = string_member(v, "use");
  if (const auto* kid = v.find("kid"); kid != nullptr && kid->as_string() != nullptr) {
    out->kid = *kid->as_string();
    out->has_kid = true;
  }
  if (out->kty == "RSA") {
    auto n = base64url_decode(string_member(v, "n"));
    auto e = base64url_decode(string_member(v, "e"));
    if (!n || !e || n->empty() || e->empty() || n->size() > 2048 || e->size() > 8) return nullptr;
    out->key.reset(rsa_key(*n, *e));
    if (out->key) out->bits = EVP_PKEY_get_bits(out->key.get());
  } else if (out->kty == "EC") {
    out->crv = string_member(v, "crv");
    if (out->crv != "P-256" && out->crv != "P-384" && out->crv != "P-521") return nullptr;
    auto x = base64url_decode(string_member(v, "x"));
    auto y = base64url_decode(string_member(v, "y"));
    if (!x || !y) return nullptr;
    out->key.reset(ec_key(out->crv, *x, *y));
  }
  if (!out->key) return nullptr;
  return out;
}

// JWS ES* signatures are r || s; OpenSSL verifies the DER of ECDSA-Sig-Value.
std::optional<std::vector<uint8_t>> ecdsa_der(const std::vector<uint8_t>& raw, size_t part) {
  if (raw.size() != 2 * part) return std::nullopt;
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (sig == nullptr) return std::nullopt;
  BIGNUM* r = BN_bin2bn(raw.data(), static_cast<int>(part), nullptr);
  BIGNUM* s = BN_bin2bn(raw.data() + part, static_cast<int>(part), nullptr);
  if (r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return std::nullopt;
  }
  const int size = i2d_ECDSA_SIG(sig, nullptr);
  std::vector<uint8_t> der(size > 0 ? static_cast<size_t>(size) : 0);
  unsigned char* p = der.data();
  const bool ok = size > 0 && i2d_ECDSA_SIG(sig, &p) == size;
  ECDSA_SIG_free(sig);
  if (!ok) return std::nullopt;
  return der;
}

bool verify(const algorithm& alg, EVP_PKEY* key, std::string_view signing_input,
            const std::vector<uint8_t>& signature) {
  std::vector<uint8_t> sig = signature;
  if (alg.kty == "EC") {
    auto der = ecdsa_der(signature, alg.ec_part);
    if (!der) return false;
    sig = std::move(*der);
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_PKEY_CTX* pctx = nullptr;
  bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), &pctx, alg.md(), nullptr, key) == 1;
  if (ok && alg.pss) {
    ok = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
         EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) == 1;
  }
  ok = ok && EVP_DigestVerify(ctx.get(), sig.data(), sig.size(),
                              reinterpret_cast<const unsigned char*>(signing_input.data()),
                              signing_input.size()) == 1;
  ERR_clear_error();  // a failed verify leaves errors on the thread's queue
  return ok;
}

jwt_refusal refuse(std::string reason) {
  return jwt_refusal{std::move(reason), false, std::nullopt};
}

// A NumericDate claim in seconds: nullopt when absent; `bad` set when present but not a number.
std::optional<double> numeric_date(const json::value& claims, std::string_view name, bool& bad) {
  const auto* v = claims.find(name);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (v->as_number() == nullptr || !std::isfinite(v->as_number()->as_double) ||
      std::fabs(v->as_number()->as_double) > 9.2e15) {
    bad = true;
    return std::nullopt;
  }
  return std::floor(v->as_number()->as_double);  // jose4j reads NumericDate as whole seconds
}

std::optional<std::string> trimmed_non_blank(const std::string& s) {
  const size_t from = s.find_first_not_of(" \t\r\n");
  if (from == std::string::npos) return std::nullopt;
  return s.substr(from, s.find_last_not_of(" \t\r\n") - from + 1);
}

}  // namespace

json_web_key_set::json_web_key_set() = default;
json_web_key_set::~json_web_key_set() = default;
json_web_key_set::json_web_key_set(json_web_key_set&&) noexcept = default;
json_web_key_set& json_web_key_set::operator=(json_web_key_set&&) noexcept = default;

result<json_web_key_set> json_web_key_set::parse(std::string_view text) {
  json::limits bounds;
  bounds.max_bytes = max_jwks_bytes;
  auto doc = json::parse(text, bounds);
  if (!doc.ok()) return doc.error();
  const auto* keys = doc->find("keys");
  if (keys == nullptr || keys->as_array() == nullptr) {
    return status::error(error_code::invalid_request, "a JSON Web Key Set needs a \"keys\" array");
  }
  if (keys->as_array()->size() > max_keys) {
    return status::error(error_code::invalid_request,
                         "a JSON Web Key Set of more than " + std::to_string(max_keys) + " keys");
  }
  json_web_key_set out;
  for (const auto& k : *keys->as_array()) {
    if (auto key = parse_key(k)) out._keys.push_back(std::move(key));
  }
  return out;
}

std::variant<oauthbearer_token, jwt_refusal> validate_signed_jwt(std::string_view token,
                                                                 const json_web_key_set& keys,
                                                                 const signed_jwt_options& options,
                                                                 int64_t now_ms) {
  if (token.size() > max_token_bytes)
    return refuse("token larger than " + std::to_string(max_token_bytes) + " bytes");
  const size_t first_dot = token.find('.');
  const size_t second_dot = first_dot == std::string_view::npos ? first_dot : token.find('.', first_dot + 1);
  if (second_dot == std::string_view::npos || token.find('.', second_dot + 1) != std::string_view::npos) {
    return refuse("a JWS compact serialization has three dot-separated parts");
  }
  auto header = decode_jws_object(token.substr(0, first_dot));
  auto claims = decode_jws_object(token.substr(first_dot + 1, second_dot - first_dot - 1));
  auto signature = base64url_decode(token.substr(second_dot + 1));
  if (!header || !claims || !signature) return refuse("malformed Base64 URL encoded value or JSON");
  const std::string alg_name = string_member(*header, "alg");
  if (alg_name == "none") return refuse("'none' is not a permitted algorithm");
  const auto* alg = find_algorithm(alg_name);
  if (alg == nullptr) return refuse("unsupported JWS algorithm '" + alg_name.substr(0, 16) + "'");
  if (header->find("crit") != nullptr) return refuse("unrecognized 'crit' header");
  std::optional<std::string> kid;
  if (const auto* k = header->find("kid"); k != nullptr && k->as_string() != nullptr) {
    kid = k->as_string()->substr(0, 1000);
  }

  // The key, as jose4j's VerificationJwkSelector: the kid, the algorithm's key type and curve, use and alg.
  const std::string_view signing_input = token.substr(0, second_dot);
  bool candidate = false;
  bool verified = false;
  for (const auto& key : keys.keys()) {
    if (kid && (!key->has_kid || key->kid != *kid)) continue;
    if (key->kty != alg->kty || (!key->use.empty() && key->use != "sig")) continue;
    if (!key->alg.empty() && key->alg != alg->name) continue;
    if (alg->kty == "EC" && key->crv != alg->crv) continue;
    candidate = true;
    if (alg->kty == "RSA" && key->bits < 2048) {
      return refuse("an RSA key of size 2048 bits or larger must be used with " + std::string(alg->name));
    }
    if (verify(*alg, key->key.get(), signing_input, *signature)) {
      verified = true;
      break;
    }
  }
  if (!candidate) {
    return jwt_refusal{
        "no suitable verification key in the JWKS" + (kid ? " for kid " + *kid : std::string()), true, kid};
  }
  if (!verified) return refuse("JWS signature is invalid");

  const int64_t skew_ms = int64_t{options.clock_skew_seconds} * 1000;
  bool bad = false;
  const auto exp = numeric_date(*claims, "exp", bad);
  const auto iat = numeric_date(*claims, "iat", bad);
  const auto nbf = numeric_date(*claims, "nbf", bad);
  if (bad) return refuse("a NumericDate claim (exp, iat, nbf) is not a number");
  if (!exp) return refuse("no Expiration Time (exp) claim present");
  if (!iat) return refuse("no Issued At (iat) claim present");
  if (static_cast<double>(now_ms) >= *exp * 1000 + static_cast<double>(skew_ms)) {
    return refuse("the JWT is no longer valid: its exp is past (with the allowed clock skew)");
  }
  if (nbf && static_cast<double>(now_ms) + static_cast<double>(skew_ms) < *nbf * 1000) {
    return refuse("the JWT is not yet valid: its nbf is ahead (with the allowed clock skew)");
  }
  if (const auto* aud = claims->find("aud"); aud != nullptr && !aud->is_null()) {
    std::vector<std::string> audiences;
    if (const auto* s = aud->as_string()) {
      audiences.push_back(*s);
    } else if (const auto* list = aud->as_array()) {
      for (const auto& a : *list) {
        if (a.as_string() == nullptr) return refuse("the aud claim is not a string or an array of strings");
        audiences.push_back(*a.as_string());
      }
    } else {
      return refuse("the aud claim is not a string or an array of strings");
    }
    if (options.expected_audiences.empty()) {
      return refuse(
          "the JWT has an aud claim but no expected audience is configured "
          "(sasl.oauthbearer.expected.audience)");
    }
    const bool match = std::any_of(audiences.begin(), audiences.end(), [&](const std::string& a) {
      return std::find(options.expected_audiences.begin(), options.expected_audiences.end(), a) !=
             options.expected_audiences.end();
    });
    if (!match) return refuse("the aud claim does not hold an expected audience");
  } else if (!options.expected_audiences.empty()) {
    return refuse("no Audience (aud) claim present");
  }
  if (options.expected_issuer) {
    const auto* iss = claims->find("iss");
    if (iss == nullptr || iss->as_string() == nullptr) return refuse("no Issuer (iss) claim present");
    if (*iss->as_string() != *options.expected_issuer)
      return refuse("the iss claim is not the expected issuer");
  }

  oauthbearer_token out;
  const auto* sub = claims->find(options.sub_claim);
  if (sub == nullptr || sub->as_string() == nullptr)
    return refuse(options.sub_claim + " value must be non-null");
  auto principal = trimmed_non_blank(*sub->as_string());
  if (!principal) return refuse(options.sub_claim + " value must not be blank");
  out.principal = std::move(*principal);
  if (const auto* scope = claims->find(options.scope_claim); scope != nullptr) {
    std::vector<const json::value*> items;
    if (scope->as_string() != nullptr) {
      items.push_back(scope);
    } else if (const auto* list = scope->as_array()) {
      for (const auto& s : *list) items.push_back(&s);
    }
    for (const auto* item : items) {
      if (item->as_string() == nullptr) return refuse(options.scope_claim + " value must be a string");
      auto s = trimmed_non_blank(*item->as_string());
      if (!s) return refuse(options.scope_claim + " value must not be blank");
      if (!out.scope.insert(*s).second)
        return refuse(options.scope_claim + " value must not contain duplicates");
    }
  }
  if (*exp < 0) return refuse("exp value must be non-negative");
  if (*iat < 0) return refuse("iat value must be null or non-negative");
  out.lifetime_ms = static_cast<int64_t>(*exp) * 1000;
  out.start_ms = static_cast<int64_t>(*iat) * 1000;
  return out;
}

}  // namespace mala::security
