#include "mala/raft/quorum_state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "mala/storage/checkpoint_file.h"

namespace mala::raft {

namespace {

// The file is one short line; anything far larger is not a quorum-state file.
constexpr size_t max_file_bytes = 64 * 1024;
constexpr int max_json_depth = 16;

// A minimal JSON reader for one object: top-level integers and strings are kept, nested values (Kafka's
// currentVoters) are checked for syntax and skipped.
class json_reader {
 public:
  explicit json_reader(std::string_view text) : _text(text) {}

  struct field {
    enum class kind { integer, string, other } type = kind::other;
    int64_t integer = 0;
    std::string string;
  };

  // false with error() set when the text is not one JSON object.
  bool read_object(std::map<std::string, field>& fields) {
    skip_ws();
    if (!consume('{')) return fail("expected a JSON object");
    skip_ws();
    if (consume('}')) return at_end();
    while (true) {
      std::string key;
      skip_ws();
      if (!read_string(key)) return false;
      skip_ws();
      if (!consume(':')) return fail("expected ':' after \"" + key + "\"");
      skip_ws();
      field value;
      if (!read_value(value, 1)) return false;
      fields[key] = std::move(value);
      skip_ws();
      if (consume(',')) continue;
      if (consume('}')) return at_end();
      return fail("expected ',' or '}'");
    }
  }

  const std::string& error() const { return _error; }

 private:
  bool fail(std::string message) {
    _error = message + " at byte " + std::to_string(_pos);
    return false;
  }
  bool at_end() {
    skip_ws();
    return _pos == _text.size() || fail("trailing characters after the object");
  }
  void skip_ws() {
    while (_pos < _text.size() &&
           (_text[_pos] == ' ' || _text[_pos] == '\t' || _text[_pos] == '\r' || _text[_pos] == '\n')) {
      ++_pos;
    }
  }
  bool consume(char c) {
    if (_pos < _text.size() && _text[_pos] == c) {
      ++_pos;
      return true;
    }
    return false;
  }
  bool read_string(std::string& out) {
    if (!consume('"')) return fail("expected a string");
    while (_pos < _text.size()) {
      const char c = _text[_pos++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c == '\\') {
        if (_pos >= _text.size()) break;
        const char e = _text[_pos++];
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u':
            // Kept as written: no field Mala reads can hold one.
            if (_pos + 4 > _text.size()) return fail("truncated \\u escape");
            for (int i = 0; i < 4; ++i) {
              if (!std::isxdigit(static_cast<unsigned char>(_text[_pos + static_cast<size_t>(i)])))
                return fail("bad \\u escape");
            }
            out += "\\u";
            out += _text.substr(_pos, 4);
            _pos += 4;
            break;
          default:
            return fail("bad escape in a string");
        }
        continue;
      }
      out += c;
    }
    return fail("unterminated string");
  }
  bool read_number(field& out) {
    const size_t start = _pos;
    consume('-');
    const size_t digits = _pos;
    while (_pos < _text.size() && std::isdigit(static_cast<unsigned char>(_text[_pos]))) ++_pos;
    if (_pos == digits) return fail("bad number");
    bool integral = true;
    if (consume('.')) {
      integral = false;
      const size_t frac = _pos;
      while (_pos < _text.size() && std::isdigit(static_cast<unsigned char>(_text[_pos]))) ++_pos;
      if (_pos == frac) return fail("bad number");
    }
    if (_pos < _text.size() && (_text[_pos] == 'e' || _text[_pos] == 'E')) {
      integral = false;
      ++_pos;
      if (!consume('+')) consume('-');
      const size_t exp = _pos;
      while (_pos < _text.size() && std::isdigit(static_cast<unsigned char>(_text[_pos]))) ++_pos;
      if (_pos == exp) return fail("bad number");
    }
    if (!integral) return true;  // type other: a fraction is never a valid id or epoch
    // Accumulate with overflow checks; anything beyond int64 is out of range for every field anyway.
    const std::string_view number = _text.substr(start, _pos - start);
    const bool negative = number.front() == '-';
    int64_t value = 0;
    for (size_t i = negative ? 1 : 0; i < number.size(); ++i) {
      const int d = number[i] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - d) / 10) return fail("number out of range");
      value = value * 10 + d;
    }
    out.type = field::kind::integer;
    out.integer = negative ? -value : value;
    return true;
  }
  bool read_literal(std::string_view word) {
    if (_text.substr(_pos, word.size()) != word) return fail("unexpected character");
    _pos += word.size();
    return true;
  }
  bool read_value(field& out, int depth) {
    if (depth > max_json_depth) return fail("JSON nested too deeply");
    if (_pos >= _text.size()) return fail("unexpected end of input");
    const char c = _text[_pos];
    if (c == '"') {
      out.type = field::kind::string;
      return read_string(out.string);
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return read_number(out);
    if (c == 't') return read_literal("true");
    if (c == 'f') return read_literal("false");
    if (c == 'n') return read_literal("null");
    if (c == '[' || c == '{') {
      const bool array = c == '[';
      ++_pos;
      skip_ws();
      if (consume(array ? ']' : '}')) return true;
      while (true) {
        skip_ws();
        if (!array) {
          std::string key;
          if (!read_string(key)) return false;
          skip_ws();
          if (!consume(':')) return fail("expected ':'");
          skip_ws();
        }
        field nested;
        if (!read_value(nested, depth + 1)) return false;
        skip_ws();
        if (consume(',')) continue;
        if (consume(array ? ']' : '}')) return true;
        return fail(array ? "expected ',' or ']'" : "expected ',' or '}'");
      }
    }
    return fail("unexpected character");
  }

  std::string_view _text;
  size_t _pos = 0;
  std::string _error;
};

status refused(std::string_view what, const std::string& why) {
  return status::error(error_code::kafka_storage_error,
                       "cannot read the quorum state from " + std::string(what) + ": " + why);
}

}  // namespace

std::string encode_quorum_state(const quorum_state& state, std::span<const int32_t> voters) {
  // Field order as Kafka's QuorumStateDataJsonConverter writes version 0.
  std::string out = "{\"clusterId\":\"\",\"leaderId\":" + std::to_string(state.leader_id) +
                    ",\"leaderEpoch\":" + std::to_string(state.leader_epoch) +
                    ",\"votedId\":" + std::to_string(state.voted_id) +
                    ",\"appliedOffset\":0,\"currentVoters\":[";
  for (size_t i = 0; i < voters.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"voterId\":" + std::to_string(voters[i]) + "}";
  }
  out += "],\"data_version\":0}";
  return out;
}

result<quorum_state> parse_quorum_state(std::string_view text, std::string_view what) {
  // FileQuorumStateStore reads the first line only.
  if (const size_t newline = text.find('\n'); newline != std::string_view::npos)
    text = text.substr(0, newline);
  std::map<std::string, json_reader::field> fields;
  json_reader reader(text);
  if (!reader.read_object(fields)) return refused(what, reader.error());

  auto integer = [&](const char* name, int64_t min, int64_t max) -> result<int64_t> {
    auto it = fields.find(name);
    if (it == fields.end()) return refused(what, std::string("missing field ") + name);
    if (it->second.type != json_reader::field::kind::integer)
      return refused(what, std::string("field ") + name + " is not an integer");
    const int64_t v = it->second.integer;
    if (v < min || v > max)
      return refused(what, std::string("field ") + name + " out of range: " + std::to_string(v));
    return v;
  };
  constexpr int64_t int32_max = std::numeric_limits<int32_t>::max();
  // FileQuorumStateStore.LOWEST_SUPPORTED_VERSION .. HIGHEST_SUPPORTED_VERSION.
  auto version = integer("data_version", 0, 1);
  if (!version.ok()) return version.error();
  auto leader_id = integer("leaderId", -1, int32_max);
  if (!leader_id.ok()) return leader_id.error();
  auto leader_epoch = integer("leaderEpoch", 0, int32_max);
  if (!leader_epoch.ok()) return leader_epoch.error();
  auto voted_id = integer("votedId", -1, int32_max);
  if (!voted_id.ok()) return voted_id.error();

  quorum_state state;
  state.leader_epoch = static_cast<int32_t>(*leader_epoch);
  state.leader_id = *leader_id < 0 ? no_leader : static_cast<int32_t>(*leader_id);
  state.voted_id = *voted_id < 0 ? no_voter : static_cast<int32_t>(*voted_id);
  return state;
}

quorum_state_file::quorum_state_file(std::filesystem::path path, std::vector<int32_t> voters)
    : _path(std::move(path)), _voters(std::move(voters)) {}

quorum_state_file quorum_state_file::in_dir(const std::filesystem::path& partition_dir,
                                            std::vector<int32_t> voters) {
  return quorum_state_file(partition_dir / quorum_state_file_name, std::move(voters));
}

result<std::optional<quorum_state>> quorum_state_file::read() const {
  const int fd = ::open(_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<quorum_state>();
    return refused(_path.string(), std::strerror(errno));
  }
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return refused(_path.string(), std::strerror(err));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > max_file_bytes) {
      ::close(fd);
      return refused(_path.string(), "file larger than " + std::to_string(max_file_bytes) + " bytes");
    }
  }
  ::close(fd);
  auto state = parse_quorum_state(text, _path.string());
  if (!state.ok()) return state.error();
  return std::optional<quorum_state>(*state);
}

status quorum_state_file::write(const quorum_state& state) const {
  return storage::write_file_atomically(_path, encode_quorum_state(state, _voters));
}

}  // namespace mala::raft
