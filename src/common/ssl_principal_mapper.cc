#include "mala/common/ssl_principal_mapper.h"

#include <cctype>

namespace mala {

namespace {

// Kafka's RULE_PATTERN and RULE_SPLITTER, in ECMAScript syntax (the same expressions).
constexpr const char* rule_pattern = R"((DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?))";

const std::regex& rule_splitter() {
  static const std::regex splitter(std::string(R"(\s*()") + rule_pattern + R"()\s*(,\s*|$))");
  return splitter;
}

const std::regex& rule_parser() {
  static const std::regex parser(rule_pattern);
  return parser;
}

// Java's String.trim: drops leading and trailing characters <= ' '.
std::string_view java_trim(std::string_view s) {
  while (!s.empty() && static_cast<unsigned char>(s.front()) <= ' ') s.remove_prefix(1);
  while (!s.empty() && static_cast<unsigned char>(s.back()) <= ' ') s.remove_suffix(1);
  return s;
}

status invalid(std::string message) {
  return status::error(error_code::invalid_config, std::move(message));
}

// Java's Matcher.appendReplacement for one match: `\x` is a literal x; `$n` the group n, taking further
// digits while they name an existing group. A reference to a group the pattern lacks is literal text, as
// Kafka escapes such references before replacing (escapeLiteralBackReferences).
void append_replacement(std::string& out, const std::string& replacement, const std::smatch& match) {
  const size_t groups = match.size() - 1;
  for (size_t i = 0; i < replacement.size(); ++i) {
    const char c = replacement[i];
    if (c == '\\' && i + 1 < replacement.size()) {
      out += replacement[++i];
      continue;
    }
    if (c != '$' || i + 1 >= replacement.size() ||
        !std::isdigit(static_cast<unsigned char>(replacement[i + 1]))) {
      out += c;
      continue;
    }
    size_t group = static_cast<size_t>(replacement[i + 1] - '0');
    if (group > groups) {
      out += c;  // the digits follow as literal text
      continue;
    }
    i += 1;
    while (i + 1 < replacement.size() && std::isdigit(static_cast<unsigned char>(replacement[i + 1]))) {
      const size_t longer = group * 10 + static_cast<size_t>(replacement[i + 1] - '0');
      if (longer > groups) break;
      group = longer;
      ++i;
    }
    if (match[group].matched) out += match[group].str();
  }
}

}  // namespace

result<ssl_principal_mapper> ssl_principal_mapper::parse(std::string_view rules_text) {
  const std::string text(java_trim(rules_text));
  std::vector<std::string> pieces;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), rule_splitter());
       it != std::sregex_iterator(); ++it) {
    pieces.push_back((*it)[1].str());
  }
  ssl_principal_mapper mapper;
  for (const auto& piece : pieces) {
    std::smatch m;
    if (!std::regex_search(piece, m, rule_parser(), std::regex_constants::match_continuous)) {
      return invalid("Invalid rule: " + piece);
    }
    if (static_cast<size_t>(m.length(0)) != piece.size()) {
      return invalid("Invalid rule: `" + piece + "`, unmatched substring: `" +
                     piece.substr(static_cast<size_t>(m.length(0))) + "`");
    }
    if (m[1].matched) {
      mapper._rules.push_back(rule{.is_default = true});
    } else if (m[2].matched) {
      rule r;
      r.pattern_text = m[2].str();
      try {
        r.pattern = std::regex(r.pattern_text);
      } catch (const std::regex_error& e) {
        return invalid("Invalid rule: `" + piece + "`: the pattern `" + r.pattern_text +
                       "` is not a regular expression: " + e.what());
      }
      r.replacement = m[4].str();
      r.to_lower = m[6].str() == "L";
      r.to_upper = m[6].str() == "U";
      mapper._rules.push_back(std::move(r));
    }
    // Empty rules are ignored.
  }
  return mapper;
}

std::optional<std::string> ssl_principal_mapper::map(const std::string& distinguished_name) const {
  for (const auto& r : _rules) {
    if (r.is_default) return distinguished_name;
    if (!std::regex_match(distinguished_name, r.pattern)) continue;
    // replaceAll: every match of the pattern, from the start, replaced.
    std::string out;
    auto last = distinguished_name.cbegin();
    for (auto it = std::sregex_iterator(distinguished_name.begin(), distinguished_name.end(), r.pattern);
         it != std::sregex_iterator(); ++it) {
      const std::smatch& m = *it;
      out.append(last, m[0].first);
      append_replacement(out, r.replacement, m);
      last = m[0].second;
    }
    out.append(last, distinguished_name.cend());
    if (r.to_lower) {
      for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (r.to_upper) {
      for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
  }
  return std::nullopt;
}

std::string ssl_principal_mapper::describe() const {
  std::string out = "[";
  for (size_t i = 0; i < _rules.size(); ++i) {
    const auto& r = _rules[i];
    if (i > 0) out += ", ";
    if (r.is_default) {
      out += "DEFAULT";
      continue;
    }
    out += "RULE:" + r.pattern_text + "/" + r.replacement;
    if (r.to_lower) {
      out += "/L";
    } else if (r.to_upper) {
      out += "/U";
    }
  }
  return out + "]";
}

}  // namespace mala
