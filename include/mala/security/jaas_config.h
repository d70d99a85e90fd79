// The JAAS configuration text of Kafka's `sasl.jaas.config` (Kafka's JaasConfig):
//
//   <login module class> <flag> [<option>=<value> ...] ; [<next module> ...]
//
// with flag one of required / requisite / sufficient / optional (any case), values bare words or quoted
// ("..." or '...', with Java's backslash escapes), and // or /* */ comments. Mala reads it for the
// PlainLoginModule's user_<name>="<password>" options. Pure functions; parse errors never echo the text,
// which holds passwords.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/config.h"
#include "mala/common/result.h"

namespace mala::security {

struct jaas_login_module {
  std::string class_name;
  std::string flag;  // lower case
  std::map<std::string, std::string> options;
};

// Errors: invalid_config with a message naming the position, not the text.
result<std::vector<jaas_login_module>> parse_jaas_config(std::string_view text);

// A listener's JAAS configuration for `mechanism`, found as Kafka's JaasContext.loadServerContext finds it:
// listener.name.<listener>.<mechanism, lower case>.sasl.jaas.config, then
// listener.name.<listener>.sasl.jaas.config, then sasl.jaas.config. `key` names where it was found, or the
// first place when it was not.
struct listener_jaas {
  std::string key;
  std::optional<std::string> text;
};
listener_jaas find_listener_jaas(const node_config& config, const std::string& listener,
                                 std::string_view mechanism);

inline constexpr std::string_view plain_login_module =
    "org.apache.kafka.common.security.plain.PlainLoginModule";
inline constexpr std::string_view scram_login_module =
    "org.apache.kafka.common.security.scram.ScramLoginModule";

}  // namespace mala::security
