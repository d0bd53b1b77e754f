#include "webdriver.hpp"

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <regex>

namespace awa::browser {
namespace {

// The key W3C gives an element reference in JSON.
constexpr const char* kElementKey = "element-6066-11e4-a52e-4f735466cecf";

std::string program_from_env(const char* var, const char* fallback) {
  const char* v = std::getenv(var);
  return find_program(v != nullptr && *v != '\0' ? v : fallback);
}

// Base64 as WebDriver sends it (RFC 4648, with padding, no line breaks).
std::string base64_decode(const std::string& in) {
  std::string out;
  out.reserve(in.size() / 4 * 3);
  unsigned buf = 0;
  int bits = 0;
  for (const char c : in) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (v < 0) continue;  // padding or whitespace
    buf = (buf << 6U) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buf >> static_cast<unsigned>(bits)) & 0xffU));
    }
  }
  return out;
}

}  // namespace

WebDriver::WebDriver(const WebDriverOptions& options) {
  const std::string driver = program_from_env("AWA_CHROMEDRIVER", "chromedriver");
  const std::string chromium = program_from_env("AWA_CHROMIUM", "chromium");
  // --port=0: chromedriver binds a free port and says which on stdout.
  chromedriver_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{driver, "--port=0", "--allowed-ips=127.0.0.1"}, options.log_path);
  const std::string port = chromedriver_->wait_for_log(
      std::regex("started successfully on port ([0-9]+)"), std::chrono::seconds(20));
  http_ = std::make_unique<httplib::Client>("127.0.0.1", std::stoi(port));
  http_->set_connection_timeout(5);
  // Navigation, screenshots and session start wait for the browser.
  http_->set_read_timeout(60);

  // Bounded wait for /status "ready" (chromedriver may print before it accepts).
  wait_until<bool>(
      "chromedriver /status ready",
      [this]() -> std::optional<bool> {
        auto r = http_->Get("/status");
        if (!r || r->status != 200) return std::nullopt;
        const auto j = nlohmann::json::parse(r->body, nullptr, false);
        if (j.is_discarded() || !j["value"].value("ready", false)) return std::nullopt;
        return true;
      },
      [this] { return chromedriver_->log(); }, std::chrono::seconds(20));

  const nlohmann::json caps = {
      {"capabilities",
       {{"alwaysMatch",
         {{"browserName", "chrome"},
          {"goog:chromeOptions",
           {{"binary", chromium},
            {"args",
             {"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=" + std::to_string(options.width) + "," +
                  std::to_string(options.height),
              // Nothing of the test's traffic leaves the machine.
              "--no-first-run", "--disable-background-networking", "--disable-extensions",
              "--disable-sync"}}}},
          {"goog:loggingPrefs", {{"browser", "ALL"}}},
          // A dialog left open is an error of the next command, not silently dismissed.
          {"unhandledPromptBehavior", "ignore"}}}}}};
  const auto v = call("POST", "/session", caps);
  session_ = v.at("sessionId").get<std::string>();
}

WebDriver::~WebDriver() {
  if (!session_.empty()) {
    try {
      call("DELETE", "/session/" + session_);
    } catch (const std::exception&) {  // chromium gone already; stop() below cleans up
    }
  }
  chromedriver_->stop();
}

nlohmann::json WebDriver::call(const std::string& method, const std::string& path,
                               const nlohmann::json& body) {
  httplib::Result r{nullptr, httplib::Error::Unknown};
  const std::string payload = body.is_null() ? std::string("{}") : body.dump();
  if (method == "GET") {
    r = http_->Get(path);
  } else if (method == "POST") {
    r = http_->Post(path, payload, "application/json");
  } else if (method == "DELETE") {
    r = http_->Delete(path);
  } else {
    throw std::invalid_argument("WebDriver: method " + method);
  }
  if (!r) {
    throw WebDriverError("transport", method + " " + path + ": " + httplib::to_string(r.error()) +
                                          "; chromedriver's output:\n" + chromedriver_->log());
  }
  const auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw WebDriverError("unknown error", method + " " + path + ": HTTP " +
                                              std::to_string(r->status) + ", not JSON: " + r->body);
  }
  const auto& value = j.contains("value") ? j["value"] : j;
  if (r->status != 200) {
    const std::string code =
        value.is_object() ? value.value("error", "unknown error") : "unknown error";
    const std::string message = value.is_object() ? value.value("message", r->body) : r->body;
    // The first line says it; the rest is chromedriver's native stack.
    throw WebDriverError(code, method + " " + path + ": " + message.substr(0, message.find('\n')));
  }
  return value;
}

nlohmann::json WebDriver::session_call(const std::string& method, const std::string& path,
                                       const nlohmann::json& body) {
  return call(method, "/session/" + session_ + path, body);
}

Element WebDriver::element_of(const nlohmann::json& v) {
  return Element{v.at(kElementKey).get<std::string>()};
}

void WebDriver::navigate(const std::string& url) { session_call("POST", "/url", {{"url", url}}); }

std::string WebDriver::current_url() { return session_call("GET", "/url").get<std::string>(); }

std::string WebDriver::title() { return session_call("GET", "/title").get<std::string>(); }

Element WebDriver::find(const std::string& css) {
  return element_of(session_call("POST", "/element", {{"using", "css selector"}, {"value", css}}));
}

std::optional<Element> WebDriver::find_optional(const std::string& css) {
  auto all = find_all(css);
  if (all.empty()) return std::nullopt;
  return all.front();
}

std::vector<Element> WebDriver::find_all(const std::string& css) {
  std::vector<Element> out;
  for (const auto& v :
       session_call("POST", "/elements", {{"using", "css selector"}, {"value", css}})) {
    out.push_back(element_of(v));
  }
  return out;
}

std::vector<Element> WebDriver::find_all(const Element& parent, const std::string& css) {
  std::vector<Element> out;
  for (const auto& v : session_call("POST", "/element/" + parent.id + "/elements",
                                    {{"using", "css selector"}, {"value", css}})) {
    out.push_back(element_of(v));
  }
  return out;
}

std::string WebDriver::text(const Element& e) {
  return session_call("GET", "/element/" + e.id + "/text").get<std::string>();
}

std::optional<std::string> WebDriver::attribute(const Element& e, const std::string& name) {
  const auto v = session_call("GET", "/element/" + e.id + "/attribute/" + name);
  if (v.is_null()) return std::nullopt;
  return v.is_string() ? v.get<std::string>() : v.dump();
}

nlohmann::json WebDriver::property(const Element& e, const std::string& name) {
  return session_call("GET", "/element/" + e.id + "/property/" + name);
}

bool WebDriver::displayed(const Element& e) {
  return session_call("GET", "/element/" + e.id + "/displayed").get<bool>();
}

void WebDriver::click(const Element& e) { session_call("POST", "/element/" + e.id + "/click"); }

void WebDriver::clear(const Element& e) { session_call("POST", "/element/" + e.id + "/clear"); }

void WebDriver::send_keys(const Element& e, const std::string& text) {
  session_call("POST", "/element/" + e.id + "/value", {{"text", text}});
}

nlohmann::json WebDriver::execute(const std::string& script, const nlohmann::json& args) {
  return session_call("POST", "/execute/sync", {{"script", script}, {"args", args}});
}

std::optional<std::string> WebDriver::alert_text() {
  try {
    return session_call("GET", "/alert/text").get<std::string>();
  } catch (const WebDriverError& e) {
    if (e.code() == "no such alert") return std::nullopt;
    throw;
  }
}

void WebDriver::accept_alert() { session_call("POST", "/alert/accept"); }

void WebDriver::dismiss_alert() { session_call("POST", "/alert/dismiss"); }

void WebDriver::screenshot(const std::string& path) {
  const std::string png = base64_decode(session_call("GET", "/screenshot").get<std::string>());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(png.data(), static_cast<std::streamsize>(png.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void WebDriver::set_window_size(int width, int height) {
  session_call("POST", "/window/rect", {{"width", width}, {"height", height}});
}

std::vector<LogEntry> WebDriver::browser_log() {
  std::vector<LogEntry> out;
  for (const auto& e : session_call("POST", "/se/log", {{"type", "browser"}})) {
    out.push_back(LogEntry{e.value("level", ""), e.value("source", ""), e.value("message", "")});
  }
  return out;
}

}  // namespace awa::browser
