#include "sql_producers.hpp"

#include <csignal>
#include <fstream>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "processes.hpp"

namespace chaos {
namespace {

std::string jsonl_path(const SqlProducerOptions& o, int i) {
  return fmt::format("{}/sql-producer-{}.jsonl", o.log_dir, i);
}

}  // namespace

SqlProducers::SqlProducers(SqlProducerOptions options) : options_(std::move(options)) {}

SqlProducers::~SqlProducers() { stop(); }

void SqlProducers::start() {
  for (int i = 0; i < options_.count; ++i) {
    const int index = options_.first_index + i;
    std::vector<std::string> argv{"/usr/bin/python3",
                                  options_.script,
                                  "--url",
                                  options_.url,
                                  "--queue",
                                  options_.queue,
                                  "--index",
                                  std::to_string(index),
                                  "--seed",
                                  std::to_string(options_.seed),
                                  "--rate",
                                  fmt::format("{}", options_.rate),
                                  "--out",
                                  jsonl_path(options_, index)};
    if (options_.huge_numbers) argv.emplace_back("--huge-numbers");
    pids_.push_back(spawn(argv, fmt::format("{}/sql-producer-{}.log", options_.log_dir, index)));
  }
}

void SqlProducers::stop() {
  for (const auto pid : pids_) ::kill(pid, SIGTERM);
  for (const auto pid : pids_) {
    if (!wait_for(pid, std::chrono::seconds(15))) {
      ::kill(pid, SIGKILL);
      wait_for(pid, std::chrono::seconds(5));
    }
  }
  pids_.clear();
}

std::vector<ProducedJob> SqlProducers::results(ProducerStats& stats) const {
  std::vector<ProducedJob> out;
  for (int i = 0; i < options_.count; ++i) {
    const int index = options_.first_index + i;
    std::ifstream in(jsonl_path(options_, index));
    if (!in) {
      ++stats.errors;
      stats.messages.push_back(fmt::format("sql producer {} wrote no record", index));
      continue;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) {
        ++stats.errors;
        if (stats.messages.size() < 10)
          stats.messages.push_back(fmt::format("sql producer {}: unreadable record", index));
        continue;
      }
      if (j.contains("error")) {
        ++stats.errors;
        if (stats.messages.size() < 10)
          stats.messages.push_back(
              fmt::format("sql producer {}: {}", index, j["error"].get<std::string>()));
        continue;
      }
      ProducedJob pj;
      pj.job_id = j.at("job_id").get<std::int64_t>();
      pj.producer = j.at("producer").get<int>();
      pj.seq = j.at("seq").get<std::int64_t>();
      pj.marker = j.at("marker").get<std::string>();
      pj.kind = j.at("kind").get<std::string>();
      if (!j.at("ordering_key").is_null()) pj.ordering_key = j["ordering_key"].get<std::string>();
      const bool unknown = j.at("commit").get<std::string>() == "unknown";
      pj.commit = unknown ? CommitState::kUnknown : CommitState::kCommitted;
      (unknown ? stats.unknown : stats.committed) += 1;
      out.push_back(std::move(pj));
    }
  }
  return out;
}

}  // namespace chaos
