// The lanes this store is writing right now, so that the rotor can step past them.
//
// A lane's lock is held from its reservation to the commit (docs/design/engine.md), so two
// calls of one process on one lane run one after the other, each waiting for the other's
// commit, while another shard of the same (queue, priority) may sit idle. The rotor still
// advances once per pick and so spreads calls uniformly over time; a pick that lands on
// a lane a call of this store is writing now takes the next shard that none is writing,
// and the rotor's own pick when every shard is busy. Keyed rows keep their hashed shard:
// they are only counted, so that unkeyed picks avoid their lanes too.
//
// It is a hint, not a lock: a call is counted from its plan to its return, so a call inside
// a caller's transaction stops counting before that transaction's commit releases the lane
// lock, and other processes' writers are not seen. Routing correctness never depends on it:
// an unkeyed job may go to any shard.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace awa::storage {

class BusyLanes {
 public:
  struct Lane {
    std::string queue;
    int priority = 0;
    int shard = 0;
    auto operator<=>(const Lane&) const = default;
  };

  // A call's lanes, counted until it is destroyed (or reset).
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)), lanes_(std::move(o.lanes_)) {}
    Hold& operator=(Hold&& o) noexcept {
      if (this != &o) {
        reset();
        owner_ = std::exchange(o.owner_, nullptr);
        lanes_ = std::move(o.lanes_);
      }
      return *this;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { reset(); }
    void reset();
    const std::vector<Lane>& lanes() const { return lanes_; }

   private:
    friend class BusyLanes;
    BusyLanes* owner_ = nullptr;
    std::vector<Lane> lanes_;
  };

  // The rotor's pick `start` (in [0, shards)) of (queue, priority), stepped past the
  // shards this store is writing; counted in `hold` until it ends.
  int pick(const std::string& queue, int priority, int shards, int start, Hold& hold);
  // A lane the call writes whatever the count says (a keyed row's shard): counted in `hold`.
  void add(const std::string& queue, int priority, int shard, Hold& hold);
  // How many calls are writing the lane now (for tests and diagnostics).
  int writers(const std::string& queue, int priority, int shard) const;

 private:
  void release(const std::vector<Lane>& lanes);
  int& count(const std::string& queue, int priority, int shard);  // REQUIRES: mu_ held

  mutable std::mutex mu_;
  // (queue, priority) -> writers per shard; guarded by mu_. Entries are dropped when no
  // shard of theirs is written, so the map holds only the lanes in flight.
  std::map<std::pair<std::string, int>, std::vector<int>> writers_;
};

}  // namespace awa::storage
