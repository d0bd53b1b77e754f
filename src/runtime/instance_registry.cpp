#include "runtime/instance_registry.hpp"

#include <unistd.h>

#include <array>
#include <cstdint>
#include <random>

#include <fmt/format.h>

#include "schema/sql_catalog.hpp"
#include "storage/pg_array.hpp"

namespace awa::runtime {
namespace {

// RFC 4122 version 4: 122 random bits. Generated here rather than by gen_random_uuid()
// so the control thread can re-insert the same row if it was expired meanwhile.
std::string random_uuid() {
  std::random_device rd;
  std::array<std::uint8_t, 16> b{};
  for (std::size_t i = 0; i < b.size(); i += 4) {
    const std::uint32_t v = rd();
    for (std::size_t k = 0; k < 4; ++k) b[i + k] = static_cast<std::uint8_t>(v >> (8 * k));
  }
  b[6] = static_cast<std::uint8_t>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<std::uint8_t>((b[8] & 0x3f) | 0x80);
  std::string s;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", b[i]);
  }
  return s;
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0') return "unknown";
  return std::string(buf.data());
}

}  // namespace

InstanceRegistry::InstanceRegistry(const std::string& schema,
                                   const std::vector<std::string>& queues)
    : id_(random_uuid()), hostname_(host_name()), pid_(static_cast<int>(::getpid())) {
  const auto quoted = sql::quote_schema(schema);
  storage::ArrayLiteral arr;
  for (const auto& q : queues) arr.add(q);
  queues_ = std::move(arr).finish();
  beat_sql_ = sql::render(sql::file("queries/runtime/instance_beat.sql"), quoted);
  tick_sql_ = sql::render(sql::file("queries/runtime/instance_leader_tick.sql"), quoted);
  remove_sql_ = sql::render(sql::file("queries/runtime/instance_remove.sql"), quoted);
}

pg::Params InstanceRegistry::identity() const {
  return pg::make_params(id_, hostname_, pid_, queues_);
}

void InstanceRegistry::beat(pg::Connection& conn) const { conn.exec(beat_sql_, identity()); }

void InstanceRegistry::leader_tick(pg::Connection& conn) const { conn.exec(tick_sql_, identity()); }

void InstanceRegistry::remove(pg::Connection& conn) const {
  conn.exec(remove_sql_, pg::make_params(id_));
}

int InstanceRegistry::expire(pg::Connection& conn, const std::string& quoted_schema,
                             std::chrono::seconds unseen) {
  return conn
      .exec(sql::render(sql::file("queries/runtime/instance_expire.sql"), quoted_schema),
            pg::make_params(fmt::format("{} seconds", unseen.count())))
      .get<int>(0, 0);
}

}  // namespace awa::runtime
