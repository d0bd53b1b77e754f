#include "pg/pipeline.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/error_map.hpp"
#include "pg/result.hpp"

namespace awa::pg {
namespace {

// Puts the connection back into blocking, non-pipeline mode on every way out of run().
// On the success path run() has already done so; on an error path the connection is
// usually broken, and a connection left in pipeline mode is discarded by the pool.
class ModeGuard {
 public:
  explicit ModeGuard(PGconn* conn) : conn_(conn) {}
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;
  ~ModeGuard() {
    // Never blocks: the flush PQsetnonblocking does still runs in non-blocking mode.
    if (PQisnonblocking(conn_) != 0) PQsetnonblocking(conn_, 0);
    if (PQpipelineStatus(conn_) != PQ_PIPELINE_OFF) PQexitPipelineMode(conn_);
  }

 private:
  PGconn* conn_;
};

// Sends everything libpq has buffered. The socket is non-blocking: while the server's
// replies fill our receive buffer it stops reading, so waiting only for writability could
// deadlock; reading whatever arrives (into libpq's buffer) keeps both sides moving.
void flush_all(PGconn* conn) {
  for (;;) {
    const int r = PQflush(conn);
    if (r == 0) return;
    if (r < 0) throw_connection_error(conn, "sending a pipeline");
    pollfd pfd{};
    pfd.fd = PQsocket(conn);
    pfd.events = POLLIN | POLLOUT;
    if (::poll(&pfd, 1, -1) < 0) {
      if (errno == EINTR) continue;
      throw ConnectionError(
          std::string("poll() failed while sending a pipeline: ") + std::strerror(errno),
          Retry::kRetryCall);
    }
    if ((pfd.revents & (POLLIN | POLLERR | POLLHUP)) != 0 && PQconsumeInput(conn) == 0) {
      throw_connection_error(conn, "sending a pipeline");
    }
  }
}

ErrorInfo plain_error(std::string message) {
  ErrorInfo info;
  info.message = std::move(message);
  return info;
}

}  // namespace

void Pipeline::add(std::string_view sql, const Params& params, Format format) {
  items_.push_back(Item{std::string(sql), params, false, false, false, format});
}

void Pipeline::add_cached(std::string_view sql, const Params& params) {
  items_.push_back(Item{std::string(sql), params, true});
}

void Pipeline::add_cached_best_effort(std::string_view sql, const Params& params) {
  items_.push_back(Item{std::string(sql), params, true, true});
}

void Pipeline::sync() {
  if (!items_.empty()) items_.back().sync_after = true;
}

std::vector<Result> Pipeline::run() {
  std::vector<Item> items = std::move(items_);
  items_.clear();
  best_effort_errors_.clear();
  if (items.empty()) return {};
  PGconn* conn = conn_.native();
  if (conn == nullptr) throw Error("pipeline on a closed (moved-from) connection");

  // Cached statements are prepared before the pipeline starts: a Parse inside it would
  // add results of its own to match up.
  std::vector<std::string> names(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].cached || conn_.pooled()) continue;
    try {
      names[i] = conn_.ensure_prepared(items[i].sql);
    } catch (const PipelineError&) {
      throw;
    } catch (const DatabaseError& e) {
      throw PipelineError(e, i);
    }
  }

  if (PQenterPipelineMode(conn) != 1) throw_connection_error(conn, "entering pipeline mode");
  ModeGuard guard(conn);
  if (PQsetnonblocking(conn, 1) != 0) throw_connection_error(conn, "entering pipeline mode");

  // --- send ---
  std::size_t sent = 0;
  std::optional<ErrorInfo> send_error;
  for (const Item& item : items) {
    if (item.params.size() > std::numeric_limits<std::uint16_t>::max()) {
      send_error = plain_error(statement_context(item.sql) + ": too many parameters");
      break;
    }
    const int n = static_cast<int>(item.params.size());
    // A pooled connection prepares nothing on the server (connection.hpp): its cached
    // statements go as unnamed ones, like the others.
    const int ok = item.cached && !conn_.pooled()
                       ? PQsendQueryPrepared(conn, names[sent].c_str(), n, item.params.values(),
                                             nullptr, nullptr, static_cast<int>(item.format))
                       : PQsendQueryParams(conn, item.sql.c_str(), n, nullptr, item.params.values(),
                                           nullptr, nullptr, static_cast<int>(item.format));
    if (ok != 1) {
      if (PQstatus(conn) != CONNECTION_OK) throw_connection_error(conn, "sending a pipeline");
      send_error = describe_result_error(nullptr, conn, statement_context(item.sql));
      break;
    }
    ++sent;
    // The last statement's Sync is the one sent after the loop.
    if (item.sync_after && sent < items.size() && PQpipelineSync(conn) != 1) {
      throw_connection_error(conn, "sending a pipeline");
    }
    // A statement followed by another goes out at once, so the server starts on it while
    // the rest is sent. One followed by its Sync goes out with the Sync (which flushes):
    // sent alone, the server would run it and then wait a client turn for the Sync inside
    // the implicit transaction, holding its locks (an enqueue's lane lock) meanwhile.
    if (!item.sync_after && sent < items.size() && PQflush(conn) < 0) {
      throw_connection_error(conn, "sending a pipeline");
    }
    if (sent % 64 == 0 && PQconsumeInput(conn) == 0) {
      throw_connection_error(conn, "sending a pipeline");
    }
  }
  if (PQpipelineSync(conn) != 1) throw_connection_error(conn, "sending a pipeline");
  flush_all(conn);
  if (PQsetnonblocking(conn, 0) != 0) throw_connection_error(conn, "sending a pipeline");

  // --- receive: per statement one result then NULL, then the Sync ---
  // The budget bounds the loop should the server and libpq ever disagree on the count.
  std::size_t budget = 6 * (sent + 1) + 16;
  const auto next = [&]() -> PGresult* {
    if (budget-- == 0) {
      throw ConnectionError("pipeline: no Sync after " + std::to_string(sent) +
                                " statements; the connection is out of step",
                            Retry::kRetryCall);
    }
    return PQgetResult(conn);
  };

  std::vector<Result> results;
  results.reserve(sent);
  std::optional<ErrorInfo> first_error;
  std::size_t first_error_index = 0;
  const auto fail = [&](std::size_t i, ErrorInfo info) {
    if (items[i].best_effort) {
      best_effort_errors_.push_back(info.message);
      results.emplace_back();
    } else if (!first_error) {
      first_error = std::move(info);
      first_error_index = i;
    }
  };
  for (std::size_t i = 0; i < sent; ++i) {
    ResultPtr res(next());
    if (!res) throw_connection_error(conn, "reading pipeline results");
    if (PQresultStatus(res.get()) == PGRES_PIPELINE_SYNC) {
      throw ConnectionError("pipeline: Sync arrived before all results", Retry::kRetryCall);
    }
    // Extended-protocol statements produce one result each; anything more is dropped.
    while (ResultPtr extra{next()}) {
      if (PQresultStatus(extra.get()) == PGRES_PIPELINE_SYNC) {
        throw ConnectionError("pipeline: Sync arrived before all results", Retry::kRetryCall);
      }
    }
    switch (PQresultStatus(res.get())) {
      case PGRES_COMMAND_OK:
      case PGRES_TUPLES_OK:
      case PGRES_EMPTY_QUERY:
        results.emplace_back(res.release());
        break;
      case PGRES_PIPELINE_ABORTED:
        // Skipped because an earlier statement of its segment failed.
        fail(i, plain_error(statement_context(items[i].sql) + ": pipeline aborted"));
        break;
      default: {
        ErrorInfo info = describe_result_error(res.get(), conn, statement_context(items[i].sql));
        if (PQstatus(conn) != CONNECTION_OK) throw_error(info);
        fail(i, std::move(info));
        break;
      }
    }
    if (items[i].sync_after && i + 1 < items.size()) {
      // This segment's Sync.
      for (;;) {
        ResultPtr s(next());
        if (!s) {
          if (PQstatus(conn) != CONNECTION_OK) {
            throw_connection_error(conn, "reading pipeline results");
          }
          continue;
        }
        if (PQresultStatus(s.get()) == PGRES_PIPELINE_SYNC) break;
        throw ConnectionError("pipeline: a result arrived where a Sync was due", Retry::kRetryCall);
      }
    }
  }
  for (;;) {
    ResultPtr res(next());
    if (!res) {
      if (PQstatus(conn) != CONNECTION_OK) throw_connection_error(conn, "reading pipeline results");
      continue;
    }
    if (PQresultStatus(res.get()) == PGRES_PIPELINE_SYNC) break;
  }
  if (PQexitPipelineMode(conn) != 1) throw_connection_error(conn, "leaving pipeline mode");

  if (!first_error && send_error) {
    first_error = std::move(send_error);
    first_error_index = sent;
  }
  if (first_error) {
    if (first_error->classification.kind == ErrorKind::kConnection) throw_error(*first_error);
    const DatabaseError cause(first_error->message, first_error->classification.retry,
                              first_error->sqlstate, first_error->detail, first_error->hint);
    throw PipelineError(cause, first_error_index);
  }
  return results;
}

}  // namespace awa::pg
