// Request parsing, JSON responses and the connection pool of awa_serve.
#include <charconv>

#include <fmt/format.h>

#include "api.hpp"

namespace awa::serve::detail {

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump(body) + "\n", "application/json");
}

namespace {

std::optional<std::int64_t> to_int(const std::string& text) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

Params::Params(const httplib::Request& req, std::initializer_list<const char*> allowed) {
  const auto add = [&](const std::string& name, std::string value) {
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return name == a; }) ==
        allowed.end())
      throw HttpError(400, fmt::format("unknown parameter \"{}\"", name));
    if (!values_.emplace(name, std::move(value)).second)
      throw HttpError(400, fmt::format("parameter \"{}\" given twice", name));
  };
  // httplib puts the query string, and a form-encoded body, into req.params.
  for (const auto& [name, value] : req.params) add(name, value);
  if (req.get_header_value("Content-Type").rfind("application/json", 0) == 0 && !req.body.empty()) {
    const auto body = nlohmann::json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object())
      throw HttpError(400, "the body must be a JSON object");
    for (const auto& [name, value] : body.items()) {
      if (value.is_string()) {
        add(name, value.get<std::string>());
      } else if (value.is_number_integer() || value.is_boolean()) {
        add(name, value.dump());
      } else if (!value.is_null()) {
        throw HttpError(400, fmt::format("parameter \"{}\": expected a string, an integer or a "
                                         "boolean",
                                         name));
      }
    }
  }
}

std::optional<std::string> Params::text(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::int64_t> Params::integer(const std::string& name, std::int64_t min,
                                            std::int64_t max) const {
  const auto t = text(name);
  if (!t) return std::nullopt;
  const auto v = to_int(*t);
  if (!v || *v < min || *v > max)
    throw HttpError(400, fmt::format("parameter \"{}\": expected an integer in {}..{}, got \"{}\"",
                                     name, min, max, *t));
  return v;
}

bool Params::flag(const std::string& name) const {
  const auto t = text(name);
  if (!t) return false;
  if (*t == "true" || *t == "1") return true;
  if (*t == "false" || *t == "0") return false;
  throw HttpError(400, fmt::format("parameter \"{}\": expected true or false", name));
}

JobId parse_job_id(const std::string& text) {
  const auto v = to_int(text);
  if (!v || *v <= 0) throw HttpError(400, fmt::format("bad job id \"{}\"", text));
  return *v;
}

Connection ConnectionPool::take() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      Connection c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  return Connection::connect(url_);
}

void ConnectionPool::give(Connection conn) {
  std::lock_guard lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(conn));
}

}  // namespace awa::serve::detail
