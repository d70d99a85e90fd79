#include "mala/security/jaas_config.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace mala::security {

namespace {

class jaas_lexer {
 public:
  explicit jaas_lexer(std::string_view text) : _text(text) {}

  enum class kind { word, quoted, equals, semicolon, end, error };
  struct token {
    kind what = kind::end;
    std::string text;
  };

  token next() {
    skip_blanks_and_comments();
    if (_failed) return {kind::error, {}};
    if (_at >= _text.size()) return {kind::end, {}};
    const char c = _text[_at];
    if (c == '=') {
      ++_at;
      return {kind::equals, "="};
    }
    if (c == ';') {
      ++_at;
      return {kind::semicolon, ";"};
    }
    if (c == '"' || c == '\'') return quoted(c);
    std::string word;
    while (_at < _text.size()) {
      const char w = _text[_at];
      if (std::isspace(static_cast<unsigned char>(w)) || w == '=' || w == ';' || w == '"' || w == '\'') break;
      if (w == '/' && _at + 1 < _text.size() && (_text[_at + 1] == '/' || _text[_at + 1] == '*')) break;
      word.push_back(w);
      ++_at;
    }
    return {kind::word, std::move(word)};
  }

  size_t position() const { return _at; }
  const std::string& failure() const { return _failure; }

 private:
  void skip_blanks_and_comments() {
    while (_at < _text.size()) {
      const char c = _text[_at];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++_at;
      } else if (c == '/' && _at + 1 < _text.size() && _text[_at + 1] == '/') {
        while (_at < _text.size() && _text[_at] != '\n') ++_at;
      } else if (c == '/' && _at + 1 < _text.size() && _text[_at + 1] == '*') {
        const size_t end = _text.find("*/", _at + 2);
        if (end == std::string_view::npos) {
          fail("unterminated comment");
          return;
        }
        _at = end + 2;
      } else {
        return;
      }
    }
  }

  // Java's StreamTokenizer escapes: \n \t \r \b \f \\ \" \' and octal \ooo; any other escaped character
  // stands for itself.
  token quoted(char quote) {
    const size_t start = _at;
    ++_at;
    std::string out;
    while (_at < _text.size()) {
      char c = _text[_at++];
      if (c == quote) return {kind::quoted, std::move(out)};
      if (c == '\n') break;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (_at >= _text.size()) break;
      c = _text[_at++];
      switch (c) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        default:
          if (c >= '0' && c <= '7') {
            int value = c - '0';
            for (int k = 0; k < 2 && _at < _text.size() && _text[_at] >= '0' && _text[_at] <= '7'; ++k) {
              value = value * 8 + (_text[_at++] - '0');
            }
            out.push_back(static_cast<char>(value & 0xff));
          } else {
            out.push_back(c);
          }
      }
    }
    _at = start;
    fail("unterminated quoted value");
    return {kind::error, {}};
  }

  void fail(std::string why) {
    _failed = true;
    _failure = std::move(why);
  }

  std::string_view _text;
  size_t _at = 0;
  bool _failed = false;
  std::string _failure;
};

status syntax_error(const jaas_lexer& lexer, std::string_view what) {
  return status::error(error_code::invalid_config, "invalid JAAS configuration at character " +
                                                       std::to_string(lexer.position()) + ": " +
                                                       std::string(what));
}

}  // namespace

result<std::vector<jaas_login_module>> parse_jaas_config(std::string_view text) {
  jaas_lexer lexer(text);
  std::vector<jaas_login_module> modules;
  for (;;) {
    auto t = lexer.next();
    if (t.what == jaas_lexer::kind::end) break;
    if (t.what == jaas_lexer::kind::error) return syntax_error(lexer, lexer.failure());
    if (t.what != jaas_lexer::kind::word) return syntax_error(lexer, "expected a login module class name");
    jaas_login_module module;
    module.class_name = std::move(t.text);
    auto flag = lexer.next();
    if (flag.what != jaas_lexer::kind::word)
      return syntax_error(lexer, "expected a login module control flag");
    std::transform(flag.text.begin(), flag.text.end(), flag.text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (flag.text != "required" && flag.text != "requisite" && flag.text != "sufficient" &&
        flag.text != "optional") {
      return syntax_error(lexer,
                          "invalid login module control flag (required, requisite, sufficient or optional)");
    }
    module.flag = std::move(flag.text);
    for (;;) {
      auto key = lexer.next();
      if (key.what == jaas_lexer::kind::semicolon) break;
      if (key.what == jaas_lexer::kind::error) return syntax_error(lexer, lexer.failure());
      if (key.what != jaas_lexer::kind::word) return syntax_error(lexer, "expected an option name or ';'");
      if (lexer.next().what != jaas_lexer::kind::equals)
        return syntax_error(lexer, "expected '=' after an option name");
      auto value = lexer.next();
      if (value.what == jaas_lexer::kind::error) return syntax_error(lexer, lexer.failure());
      if (value.what != jaas_lexer::kind::word && value.what != jaas_lexer::kind::quoted) {
        return syntax_error(lexer, "expected an option value");
      }
      module.options[key.text] = std::move(value.text);
    }
    modules.push_back(std::move(module));
  }
  if (modules.empty()) {
    return status::error(error_code::invalid_config, "invalid JAAS configuration: no login module");
  }
  return modules;
}

listener_jaas find_listener_jaas(const node_config& config, const std::string& listener,
                                 std::string_view mechanism) {
  std::string lowered_listener = listener;
  std::string lowered_mechanism(mechanism);
  for (auto* s : {&lowered_listener, &lowered_mechanism}) {
    for (auto& c : *s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  const std::string prefix = "listener.name." + lowered_listener + ".";
  const std::string own = lowered_mechanism + ".sasl.jaas.config";
  if (auto text = config.listener_setting(listener, own)) return {prefix + own, std::move(text)};
  if (auto text = config.listener_setting(listener, "sasl.jaas.config"))
    return {prefix + "sasl.jaas.config", std::move(text)};
  if (auto text = config.get_string("sasl.jaas.config")) return {"sasl.jaas.config", std::move(text)};
  return {prefix + own, std::nullopt};
}

}  // namespace mala::security
