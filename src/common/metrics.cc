#include "mala/common/metrics.h"

#include <cmath>

#include <fmt/format.h>

namespace mala::metrics {

size_t latency_bucket_of(uint64_t micros) {
  const double ms = static_cast<double>(micros) / 1000.0;
  for (size_t i = 0; i < latency_bounds_ms.size(); ++i) {
    if (ms <= latency_bounds_ms[i]) return i;
  }
  return latency_bounds_ms.size();
}

uint64_t latency_histogram::count() const {
  uint64_t n = 0;
  for (uint64_t b : buckets) n += b;
  return n;
}

void latency_histogram::merge(const latency_histogram& other) {
  for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += other.buckets[i];
  sum_micros += other.sum_micros;
}

latency_histogram shared_histogram::snapshot() const {
  latency_histogram h;
  for (size_t i = 0; i < h.buckets.size(); ++i) h.buckets[i] = _buckets[i].load(std::memory_order_relaxed);
  h.sum_micros = _sum_micros.load(std::memory_order_relaxed);
  return h;
}

namespace {

std::string_view type_name(prometheus_text::type t) {
  switch (t) {
    case prometheus_text::type::counter:
      return "counter";
    case prometheus_text::type::gauge:
      return "gauge";
    case prometheus_text::type::histogram:
      return "histogram";
  }
  return "untyped";
}

void append_escaped(std::string& out, std::string_view value, bool quote_escapes) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote_escapes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_value(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    fmt::format_to(std::back_inserter(out), "{}", value);
  }
}

}  // namespace

void prometheus_text::family(std::string_view name, std::string_view help, type t) {
  // Text format 0.0.4 names a family as its samples are named, _total included (client_golang's and the
  // Python client's output); only OpenMetrics drops the suffix from a counter's family name.
  const std::string_view family_name = name;
  _out += "# HELP ";
  _out += family_name;
  _out += ' ';
  append_escaped(_out, help, false);
  _out += "\n# TYPE ";
  _out += family_name;
  _out += ' ';
  _out += type_name(t);
  _out += '\n';
}

void prometheus_text::labels(std::initializer_list<label> labels, std::string_view extra_name,
                             std::string_view extra_value) {
  if (labels.size() == 0 && extra_name.empty()) return;
  _out += '{';
  bool first = true;
  auto one = [&](std::string_view n, std::string_view v) {
    if (!first) _out += ',';
    first = false;
    _out += n;
    _out += "=\"";
    append_escaped(_out, v, true);
    _out += '"';
  };
  for (const auto& [n, v] : labels) one(n, v);
  if (!extra_name.empty()) one(extra_name, extra_value);
  _out += '}';
}

void prometheus_text::sample(std::string_view name, std::initializer_list<label> l, double value) {
  _out += name;
  labels(l);
  _out += ' ';
  append_value(_out, value);
  _out += '\n';
}

void prometheus_text::sample(std::string_view name, std::initializer_list<label> l, uint64_t value) {
  _out += name;
  labels(l);
  fmt::format_to(std::back_inserter(_out), " {}\n", value);
}

void prometheus_text::histogram(std::string_view name, std::initializer_list<label> l,
                                const latency_histogram& h) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.buckets.size(); ++i) {
    cumulative += h.buckets[i];
    std::string bound = i < latency_bounds_ms.size() ? fmt::format("{}", latency_bounds_ms[i]) : "+Inf";
    _out += name;
    _out += "_bucket";
    labels(l, "le", bound);
    fmt::format_to(std::back_inserter(_out), " {}\n", cumulative);
  }
  _out += name;
  _out += "_sum";
  labels(l);
  _out += ' ';
  append_value(_out, static_cast<double>(h.sum_micros) / 1000.0);
  _out += '\n';
  _out += name;
  _out += "_count";
  labels(l);
  fmt::format_to(std::back_inserter(_out), " {}\n", cumulative);
}

}  // namespace mala::metrics
