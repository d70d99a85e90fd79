#include "mala/controller/client_metrics_config.h"

#include <algorithm>
#include <optional>
#include <regex>

#include "mala/controller/topic_config.h"

namespace mala::controller {

struct compiled_client_metrics_pattern {
  std::regex regex;
};

namespace {

// Java's String.split("="): every '=' splits, trailing empty parts are dropped.
std::vector<std::string> java_split_on_equals(std::string_view text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = text.find('=', start);
    parts.emplace_back(
        text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  while (!parts.empty() && parts.back().empty()) parts.pop_back();
  return parts;
}

std::string trimmed(std::string_view text) {
  const auto is_space = [](char c) { return static_cast<unsigned char>(c) <= ' '; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return std::string(text);
}

bool is_match_attribute(std::string_view name) {
  return std::find(std::begin(client_metrics_match_attributes), std::end(client_metrics_match_attributes),
                   name) != std::end(client_metrics_match_attributes);
}

}  // namespace

bool client_metrics_subscription::matches(const std::map<std::string, std::string>& attributes) const {
  for (const auto& [attribute, pattern] : match) {
    const auto it = attributes.find(attribute);
    // std::regex matches recursively, a frame per character for some patterns: a value longer than any
    // real client's attribute (a client id may be 32 KiB) is not matched rather than risk the stack.
    if (it == attributes.end() || it->second.size() > client_metrics_max_matched_length ||
        !std::regex_match(it->second, pattern.regex->regex))
      return false;
  }
  return true;
}

bool is_client_metrics_config(std::string_view name) {
  return name == client_metrics_metrics_config || name == client_metrics_interval_config ||
         name == client_metrics_match_config;
}

bool is_client_metrics_list_config(std::string_view name) {
  return name == client_metrics_metrics_config || name == client_metrics_match_config;
}

result<client_metrics_subscription> parse_client_metrics_configs(const std::string& name,
                                                                 const metadata::config_map& configs) {
  if (name.empty()) return status::error(error_code::invalid_request, "Subscription name can't be empty");
  for (const auto& [key, value] : configs) {
    if (!is_client_metrics_config(key))
      return status::error(error_code::invalid_request, "Unknown client metrics configuration: " + key);
  }
  client_metrics_subscription out;
  out.name = name;
  // ConfigDef.parse, in the order the keys are defined: the lists' ValidList.anyNonDuplicateValues, the INT.
  std::vector<std::string> match_entries;
  std::optional<int64_t> interval;
  for (std::string_view key :
       {client_metrics_metrics_config, client_metrics_interval_config, client_metrics_match_config}) {
    const auto it = configs.find(std::string(key));
    if (it == configs.end()) continue;
    if (key == client_metrics_interval_config) {
      interval = parse_config_long(trimmed(it->second));
      if (!interval || *interval < INT32_MIN || *interval > INT32_MAX) {
        return status::error(error_code::invalid_config, "Invalid value " + it->second +
                                                             " for configuration " + std::string(key) +
                                                             ": Not a number of type INT");
      }
      continue;
    }
    std::vector<std::string> values = parse_config_list(it->second);
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].empty())
        return status::error(error_code::invalid_config,
                             "Configuration '" + std::string(key) + "' values must not be empty.");
      if (std::find(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(i), values[i]) !=
          values.begin() + static_cast<std::ptrdiff_t>(i))
        return status::error(error_code::invalid_config,
                             "Configuration '" + std::string(key) + "' values must not be duplicated.");
    }
    (key == client_metrics_metrics_config ? out.metrics : match_entries) = std::move(values);
  }
  if (interval) {
    const int64_t value = *interval;
    if (value < client_metrics_min_interval_ms || value > client_metrics_max_interval_ms) {
      return status::error(error_code::invalid_request,
                           "Invalid value " + std::to_string(value) + " for " +
                               std::string(client_metrics_interval_config) +
                               ", interval must be between 100 and 3600000 (1 hour)");
    }
    out.interval_ms = static_cast<int32_t>(value);
  }
  {
    for (const std::string& entry : match_entries) {
      const auto illegal =
          status::error(error_code::invalid_config, "Illegal client matching pattern: " + entry);
      const std::vector<std::string> pair = java_split_on_equals(entry);
      if (pair.size() != 2) return illegal;
      const std::string attribute = trimmed(pair[0]);
      if (!is_match_attribute(attribute)) return illegal;
      // ECMAScript syntax stands in for Java's: the common forms (., *, +, ?, classes, groups, anchors,
      // alternation) read the same. A pattern std::regex refuses is refused as Java's compile would.
      client_metrics_pattern pattern{trimmed(pair[1]), nullptr};
      try {
        pattern.regex = std::make_shared<const compiled_client_metrics_pattern>(
            compiled_client_metrics_pattern{std::regex(pattern.text, std::regex::ECMAScript)});
      } catch (const std::regex_error&) {
        return illegal;
      }
      out.match[attribute] = std::move(pattern);
    }
  }
  return out;
}

}  // namespace mala::controller
