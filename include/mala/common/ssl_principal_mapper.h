// Kafka's ssl.principal.mapping.rules (SslPrincipalMapper): maps the distinguished name of a TLS client's
// certificate (formatted as Java's X500Principal.getName(), RFC 2253) to the name of its Kafka principal.
//
// Rules are comma-separated: `DEFAULT` (the DN itself) or `RULE:pattern/replacement/[LU]`, where a rule
// applies when `pattern` matches the whole DN, and then yields the DN with every match of `pattern` replaced
// by `replacement` (`$n` group references, `\x` a literal x, as Java's replaceAll), lower- or upper-cased
// with /L or /U. The first rule that applies wins; none applying fails the authentication.
//
// Patterns are ECMAScript regular expressions (std::regex), which agree with Java's for the constructs such
// rules use (groups, classes, lazy quantifiers, anchors, \w \d \s); Java-only syntax (possessive quantifiers,
// named groups, \p{...}) is refused when the rules are parsed. Immutable once built: any thread.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"

namespace mala {

class ssl_principal_mapper {
 public:
  // Parses the rules as Kafka does; an invalid rule is invalid_config naming it.
  static result<ssl_principal_mapper> parse(std::string_view rules);

  // The principal name for `distinguished_name`, or nullopt when no rule applies (Kafka's NoMatchingRule).
  std::optional<std::string> map(const std::string& distinguished_name) const;

  // Kafka's toString of the rules: "[RULE:pattern/replacement/L, DEFAULT]".
  std::string describe() const;

 private:
  struct rule {
    bool is_default = false;
    std::string pattern_text;
    std::regex pattern;
    std::string replacement;
    bool to_lower = false;
    bool to_upper = false;
  };
  std::vector<rule> _rules;
};

}  // namespace mala
