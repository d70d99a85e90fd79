// Signed JWTs as Kafka's OAuthBearerValidatorCallbackHandler (jose4j) checks them: tokens signed here with
// freshly generated RSA and EC keys (OpenSSL), the key set written as JWKS JSON, and every check: algorithms
// RS/PS/ES, key choice by kid, type, curve and use, alg none, small RSA keys, crit, a tampered payload, exp /
// nbf with the clock skew, iat required, aud and iss, sub and scope claims.
#include "mala/security/jwt.h"

#include <gtest/gtest.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <memory>
#include <string>

#include "mala/security/scram.h"

namespace mala::security {
namespace {

using pkey_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

std::string b64url(const std::vector<uint8_t>& bytes) {
  std::string out = base64_encode(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (auto& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}
std::string b64url(const std::string& s) {
  return b64url(std::vector<uint8_t>(s.begin(), s.end()));
}

pkey_ptr generate_rsa(int bits) {
  return pkey_ptr(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(bits)), EVP_PKEY_free);
}
pkey_ptr generate_ec(const char* group) {
  return pkey_ptr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", group), EVP_PKEY_free);
}

std::vector<uint8_t> bn_bytes(EVP_PKEY* key, const char* name, size_t pad = 0) {
  BIGNUM* bn = nullptr;
  EVP_PKEY_get_bn_param(key, name, &bn);
  std::vector<uint8_t> out(std::max<size_t>(pad, static_cast<size_t>(BN_num_bytes(bn))));
  BN_bn2binpad(bn, out.data(), static_cast<int>(out.size()));
  BN_free(bn);
  return out;
}

std::string rsa_jwk(EVP_PKEY* key, const std::string& kid, const std::string& extra = "") {
  return R"({"kty":"RSA","kid":")" + kid + R"(","n":")" + b64url(bn_bytes(key, OSSL_PKEY_PARAM_RSA_N)) +
         R"(","e":")" + b64url(bn_bytes(key, OSSL_PKEY_PARAM_RSA_E)) + "\"" + extra + "}";
}

std::string ec_jwk(EVP_PKEY* key, const std::string& kid, const std::string& crv, size_t size) {
  return R"({"kty":"EC","kid":")" + kid + R"(","crv":")" + crv + R"(","x":")" +
         b64url(bn_bytes(key, OSSL_PKEY_PARAM_EC_PUB_X, size)) + R"(","y":")" +
         b64url(bn_bytes(key, OSSL_PKEY_PARAM_EC_PUB_Y, size)) + "\"}";
}

std::vector<uint8_t> sign(EVP_PKEY* key, const std::string& alg, const std::string& input) {
  const EVP_MD* md = alg.ends_with("256") ? EVP_sha256() : alg.ends_with("384") ? EVP_sha384() : EVP_sha512();
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_PKEY_CTX* pctx = nullptr;
  EVP_DigestSignInit(ctx.get(), &pctx, md, nullptr, key);
  if (alg.starts_with("PS")) {
    EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING);
    EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST);
  }
  size_t size = 0;
  EVP_DigestSign(ctx.get(), nullptr, &size, reinterpret_cast<const unsigned char*>(input.data()),
                 input.size());
  std::vector<uint8_t> sig(size);
  EVP_DigestSign(ctx.get(), sig.data(), &size, reinterpret_cast<const unsigned char*>(input.data()),
                 input.size());
  sig.resize(size);
  if (!alg.starts_with("ES")) return sig;
  // DER -> r || s
  const size_t part = alg == "ES256" ? 32 : alg == "ES384" ? 48 : 66;
  const unsigned char* p = sig.data();
  ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
  std::vector<uint8_t> raw(2 * part);
  BN_bn2binpad(ECDSA_SIG_get0_r(es), raw.data(), static_cast<int>(part));
  BN_bn2binpad(ECDSA_SIG_get0_s(es), raw.data() + part, static_cast<int>(part));
  ECDSA_SIG_free(es);
  return raw;
}

std::string jwt(EVP_PKEY* key, const std::string& alg, const std::string& kid, const std::string& claims,
                const std::string& extra_header = "") {
  const std::string input =
      b64url(R"({"alg":")" + alg + R"(","kid":")" + kid + "\"" + extra_header + "}") + "." + b64url(claims);
  return input + "." + b64url(sign(key, alg, input));
}

constexpr int64_t now_ms = 1'700'000'000'000;
const std::string good_claims = R"({"sub":"alice","iat":1699999990,"exp":1700000600,"scope":"read write"})";

class jwt_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa = generate_rsa(2048).release();
    small_rsa = generate_rsa(1024).release();
    p256 = generate_ec("P-256").release();
    p521 = generate_ec("P-521").release();
  }
  static void TearDownTestSuite() {
    for (auto* k : {rsa, small_rsa, p256, p521}) EVP_PKEY_free(k);
  }
  json_web_key_set keys() {
    auto set = json_web_key_set::parse(R"({"keys":[)" + rsa_jwk(rsa, "rsa-1") + "," +
                                       rsa_jwk(small_rsa, "small") + "," + ec_jwk(p256, "ec-1", "P-256", 32) +
                                       "," + ec_jwk(p521, "ec-2", "P-521", 66) + "," +
                                       R"({"kty":"oct","kid":"hmac","k":"c2VjcmV0"}]})");
    EXPECT_TRUE(set.ok()) << set.error().message;
    return std::move(*set);
  }
  std::string why(const std::string& token, const signed_jwt_options& options = {}) {
    auto set = keys();
    auto v = validate_signed_jwt(token, set, options, now_ms);
    return std::holds_alternative<jwt_refusal>(v) ? std::get<jwt_refusal>(v).reason : "accepted";
  }
  static inline EVP_PKEY* rsa = nullptr;
  static inline EVP_PKEY* small_rsa = nullptr;
  static inline EVP_PKEY* p256 = nullptr;
  static inline EVP_PKEY* p521 = nullptr;
};

TEST_F(jwt_test, every_algorithm_verifies_with_its_key) {
  EXPECT_EQ(keys().size(), 4u);  // the oct key is skipped
  for (const char* alg : {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}) {
    EXPECT_EQ(why(jwt(rsa, alg, "rsa-1", good_claims)), "accepted") << alg;
  }
  EXPECT_EQ(why(jwt(p256, "ES256", "ec-1", good_claims)), "accepted");
  EXPECT_EQ(why(jwt(p521, "ES512", "ec-2", good_claims)), "accepted");
  auto set = keys();
  auto v = validate_signed_jwt(jwt(rsa, "RS256", "rsa-1", good_claims), set, {}, now_ms);
  ASSERT_TRUE(std::holds_alternative<oauthbearer_token>(v));
  const auto& token = std::get<oauthbearer_token>(v);
  EXPECT_EQ(token.principal, "alice");
  EXPECT_EQ(token.lifetime_ms, 1'700'000'600'000);
  EXPECT_EQ(token.scope, (std::set<std::string>{"read write"}));
}

TEST_F(jwt_test, signatures_and_keys_are_checked) {
  // Signed by another key under the same kid; a payload changed after signing.
  auto other = generate_rsa(2048);
  EXPECT_EQ(why(jwt(other.get(), "RS256", "rsa-1", good_claims)), "JWS signature is invalid");
  auto token = jwt(rsa, "RS256", "rsa-1", good_claims);
  const size_t dot = token.find('.');
  const std::string forged = token.substr(0, dot + 1) +
                             b64url(R"({"sub":"root","iat":1699999990,"exp":1700000600})") +
                             token.substr(token.rfind('.'));
  EXPECT_EQ(why(forged), "JWS signature is invalid");
  // An unknown kid asks for a refresh; a kid of another key type finds nothing either.
  auto set = keys();
  auto unknown = validate_signed_jwt(jwt(rsa, "RS256", "rotated", good_claims), set, {}, now_ms);
  ASSERT_TRUE(std::holds_alternative<jwt_refusal>(unknown));
  EXPECT_TRUE(std::get<jwt_refusal>(unknown).unknown_key);
  EXPECT_EQ(std::get<jwt_refusal>(unknown).kid, "rotated");
  EXPECT_NE(why(jwt(p256, "ES256", "rsa-1", good_claims)).find("no suitable verification key"),
            std::string::npos);
  // An ES256 token cannot use the P-521 key.
  EXPECT_NE(why(jwt(p256, "ES256", "ec-2", good_claims)).find("no suitable"), std::string::npos);
  EXPECT_NE(why(jwt(small_rsa, "RS256", "small", good_claims)).find("2048 bits"), std::string::npos);
  EXPECT_EQ(why(b64url(R"({"alg":"none"})") + "." + b64url(good_claims) + "."),
            "'none' is not a permitted algorithm");
  EXPECT_NE(why(jwt(rsa, "HS256", "hmac", good_claims)).find("unsupported JWS algorithm"), std::string::npos);
  EXPECT_EQ(why(jwt(rsa, "RS256", "rsa-1", good_claims, R"(,"crit":["exp"])")), "unrecognized 'crit' header");
  EXPECT_NE(why("a.b"), "accepted");
  EXPECT_NE(why("!!.??.**"), "accepted");
  // A key marked for encryption or for another algorithm is not used.
  auto enc = json_web_key_set::parse(R"({"keys":[)" + rsa_jwk(rsa, "rsa-1", R"(,"use":"enc")") + "]}");
  ASSERT_TRUE(enc.ok());
  EXPECT_TRUE(std::holds_alternative<jwt_refusal>(
      validate_signed_jwt(jwt(rsa, "RS256", "rsa-1", good_claims), *enc, {}, now_ms)));
  auto ps_only = json_web_key_set::parse(R"({"keys":[)" + rsa_jwk(rsa, "rsa-1", R"(,"alg":"PS256")") + "]}");
  ASSERT_TRUE(ps_only.ok());
  EXPECT_TRUE(std::holds_alternative<jwt_refusal>(
      validate_signed_jwt(jwt(rsa, "RS256", "rsa-1", good_claims), *ps_only, {}, now_ms)));
  EXPECT_TRUE(std::holds_alternative<oauthbearer_token>(
      validate_signed_jwt(jwt(rsa, "PS256", "rsa-1", good_claims), *ps_only, {}, now_ms)));
  EXPECT_FALSE(json_web_key_set::parse(R"({"nokeys":[]})").ok());
  EXPECT_FALSE(json_web_key_set::parse("[]").ok());
}

TEST_F(jwt_test, claims_are_checked_as_jose4j_and_kafka_do) {
  auto token = [&](const std::string& claims) { return jwt(rsa, "RS256", "rsa-1", claims); };
  // exp: required; past it by more than the skew (30 s by default) is refused, within it accepted.
  EXPECT_NE(why(token(R"({"sub":"a","iat":1699999990})")).find("exp"), std::string::npos);
  EXPECT_NE(why(token(R"({"sub":"a","iat":1699999900,"exp":1699999960})")).find("no longer valid"),
            std::string::npos);
  EXPECT_EQ(why(token(R"({"sub":"a","iat":1699999900,"exp":1699999980})")), "accepted");
  signed_jwt_options strict;
  strict.clock_skew_seconds = 0;
  EXPECT_NE(why(token(R"({"sub":"a","iat":1699999900,"exp":1699999980})"), strict), "accepted");
  // iat required; nbf ahead of now by more than the skew refused.
  EXPECT_NE(why(token(R"({"sub":"a","exp":1700000600})")).find("iat"), std::string::npos);
  EXPECT_NE(
      why(token(R"({"sub":"a","iat":1699999990,"exp":1700000600,"nbf":1700000100})")).find("not yet valid"),
      std::string::npos);
  EXPECT_EQ(why(token(R"({"sub":"a","iat":1699999990,"exp":1700000600,"nbf":1700000020})")), "accepted");
  // aud: refused without an expected audience (jose4j's default), else one must match.
  const std::string with_aud = R"({"sub":"a","iat":1699999990,"exp":1700000600,"aud":["kafka","other"]})";
  EXPECT_NE(why(token(with_aud)).find("expected audience"), std::string::npos);
  signed_jwt_options audience;
  audience.expected_audiences = {"kafka"};
  EXPECT_EQ(why(token(with_aud), audience), "accepted");
  audience.expected_audiences = {"nobody"};
  EXPECT_NE(why(token(with_aud), audience), "accepted");
  EXPECT_NE(why(token(good_claims), audience).find("aud"), std::string::npos);
  // iss: must equal the expected issuer when one is set.
  signed_jwt_options issuer;
  issuer.expected_issuer = "https://issuer.example";
  EXPECT_NE(why(token(good_claims), issuer).find("iss"), std::string::npos);
  EXPECT_EQ(
      why(token(R"({"sub":"a","iat":1699999990,"exp":1700000600,"iss":"https://issuer.example"})"), issuer),
      "accepted");
  // sub: a non-blank string, under its configured name; scope: strings without duplicates.
  EXPECT_NE(why(token(R"({"iat":1699999990,"exp":1700000600})")).find("sub"), std::string::npos);
  EXPECT_NE(why(token(R"({"sub":" ","iat":1699999990,"exp":1700000600})")).find("blank"), std::string::npos);
  signed_jwt_options names;
  names.sub_claim = "client_id";
  names.scope_claim = "scp";
  auto set = keys();
  auto renamed =
      validate_signed_jwt(token(R"({"client_id":" svc ","iat":1699999990,"exp":1700000600,"scp":["a","b"]})"),
                          set, names, now_ms);
  ASSERT_TRUE(std::holds_alternative<oauthbearer_token>(renamed));
  EXPECT_EQ(std::get<oauthbearer_token>(renamed).principal, "svc");
  EXPECT_EQ(std::get<oauthbearer_token>(renamed).scope, (std::set<std::string>{"a", "b"}));
  EXPECT_NE(
      why(token(R"({"sub":"a","iat":1699999990,"exp":1700000600,"scope":["x","x"]})")).find("duplicates"),
      std::string::npos);
}

}  // namespace
}  // namespace mala::security
