// A small W3C WebDriver client for the dashboard's browser test: it starts chromedriver
// (Debian's chromium-driver) on a free loopback port, opens one headless chromium
// session and speaks the W3C protocol over cpp-httplib. Only what the test needs:
// navigate, find by CSS, text / attribute / property, click, send keys, execute script,
// alerts, screenshots and the browser console log.
//
// The console log: chromedriver keeps Selenium's legacy log endpoint in W3C mode
// (POST /session/{id}/se/log {"type": "browser"}; checked with chromium 156) when the
// session asks for "goog:loggingPrefs": {"browser": "ALL"}. It returns console.* calls,
// uncaught exceptions ("source": "javascript") and failed loads ("source": "network",
// e.g. a 404 answer to fetch()), each read once: a read drains the buffer.
//
// Programs: $AWA_CHROMEDRIVER and $AWA_CHROMIUM, else `chromedriver` and `chromium`
// from PATH. Errors: WebDriverError, carrying the W3C error code ("no such element",
// "stale element reference", ...). Not thread-safe: one thread drives the browser.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"

namespace httplib {
class Client;
}

namespace awa::browser {

class WebDriverError : public std::runtime_error {
 public:
  WebDriverError(std::string code, const std::string& message)
      : std::runtime_error(code + ": " + message), code_(std::move(code)) {}
  // The W3C error code, e.g. "no such element"; "transport" when chromedriver did not
  // answer at all.
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

// A reference to a DOM element of the current page. It goes stale when the page
// re-renders the element (the dashboard re-renders every 3 s): use it at once.
struct Element {
  std::string id;
};

struct LogEntry {
  std::string level;   // "SEVERE", "WARNING", "INFO", "DEBUG"
  std::string source;  // "console-api", "javascript", "network", ...
  std::string message;
};

struct WebDriverOptions {
  std::string log_path;  // chromedriver's stdout and stderr
  int width = 1280;
  int height = 900;
};

class WebDriver {
 public:
  // Starts chromedriver and a session; throws std::runtime_error / WebDriverError, with
  // chromedriver's output, when either does not come up within 20 s.
  explicit WebDriver(const WebDriverOptions& options);
  // Deletes the session (chromium quits) and stops chromedriver.
  ~WebDriver();
  WebDriver(const WebDriver&) = delete;
  WebDriver& operator=(const WebDriver&) = delete;

  // Loads `url` and returns when the page has loaded (document.readyState complete).
  void navigate(const std::string& url);
  std::string current_url();
  std::string title();

  // The first element matching `css`; WebDriverError "no such element" when none does.
  Element find(const std::string& css);
  std::optional<Element> find_optional(const std::string& css);
  std::vector<Element> find_all(const std::string& css);
  // Within `parent`.
  std::vector<Element> find_all(const Element& parent, const std::string& css);

  // The rendered text (hidden elements give "").
  std::string text(const Element& e);
  // The attribute's value; nullopt when the element does not have it.
  std::optional<std::string> attribute(const Element& e, const std::string& name);
  // A DOM property (e.g. "value", "checked") as JSON.
  nlohmann::json property(const Element& e, const std::string& name);
  bool displayed(const Element& e);
  // A real click: scrolled into view, refused ("element not interactable", "element click
  // intercepted") when hidden or covered.
  void click(const Element& e);
  void clear(const Element& e);
  void send_keys(const Element& e, const std::string& text);

  // Runs `script` as the body of a function with `args` as `arguments`; returns its
  // result. A returned promise is awaited (W3C "Execute Script").
  nlohmann::json execute(const std::string& script,
                         const nlohmann::json& args = nlohmann::json::array());

  // The open alert / confirm dialog's text; nullopt when none is open.
  std::optional<std::string> alert_text();
  void accept_alert();
  void dismiss_alert();

  // A PNG of the viewport, written to `path`.
  void screenshot(const std::string& path);
  // The browser window's outer size (the viewport is smaller by the window's frame).
  void set_window_size(int width, int height);

  // Console entries since the last call (the buffer is drained).
  std::vector<LogEntry> browser_log();

  const std::string& chromedriver_log_path() const { return chromedriver_->log_path(); }

 private:
  nlohmann::json call(const std::string& method, const std::string& path,
                      const nlohmann::json& body = nullptr);
  nlohmann::json session_call(const std::string& method, const std::string& path,
                              const nlohmann::json& body = nullptr);
  static Element element_of(const nlohmann::json& v);

  std::unique_ptr<ChildProcess> chromedriver_;
  std::unique_ptr<httplib::Client> http_;
  std::string session_;
};

// Polls `probe` until it returns a value (a std::optional<T> with a value) or `timeout`
// passes; then throws std::runtime_error naming `what` and the last thing `describe`
// said about the page. A stale element or a missing one during a re-render counts as
// "not yet". The pause between polls only paces the polling.
template <class T>
T wait_until(const std::string& what, const std::function<std::optional<T>()>& probe,
             const std::function<std::string()>& describe = {},
             std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error;
  for (;;) {
    try {
      if (auto v = probe()) return *v;
    } catch (const WebDriverError& e) {
      if (e.code() != "stale element reference" && e.code() != "no such element") throw;
      last_error = e.what();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string msg =
          "timed out after " + std::to_string(timeout.count()) + " ms waiting for: " + what;
      if (!last_error.empty()) msg += "\n  last error: " + last_error;
      if (describe) {
        try {
          msg += "\n  seen: " + describe();
        } catch (const std::exception& e) {
          msg += std::string("\n  (describing the page failed: ") + e.what() + ")";
        }
      }
      throw std::runtime_error(msg);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace awa::browser
