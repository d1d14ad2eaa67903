#pragma once
// SimAgents: a test fixture of whole groups (machine_group.h) as the agents of one job in simulated
// time (sim_world.h) — what StoreGroupTest (over the master's store, sim_group_store.h) and
// EtcdGroupTest (over etcd, sim_etcd.h) share: the job's plan, the bodies an agent runs (meets,
// hearsAndEnds, at, then) and what each agent was told, decided and placed, with the instants.
// A subclass makes the groups (agent()) and says how one connects (connect()).

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher/plan/launch_plan.h"
#include "launcher/rendezvous/machine_group.h"
#include "probes/environment.h"
#include "sim_world.h"

namespace accel::launcher::testing {

using namespace std::chrono_literals;

// What an agent heard on its round's link, and when.
struct Heard {
  int64_t at_ms = -1;
  LinkEvent event{};
};

class SimAgents : public ::testing::Test {
 protected:
  // A job of 2 to 3 machines with 2 ranks each: keep-alives every 250 ms, a member silent for 4 of
  // them (1 s) is lost.
  SimAgents() {
    plan_.rendezvous_id = "sim";
    plan_.num_machines = 3;
    plan_.min_machines = 2;
    plan_.local_world_size = 2;
    plan_.world_size = 6;
    plan_.max_restarts = 3;
    plan_.round_timeouts.join = 900s;
    plan_.round_timeouts.last_call = 300ms;
    plan_.round_timeouts.keep_alive_interval = 250ms;
    plan_.round_timeouts.keep_alive_misses = 4;
  }

  // The group's connect() (not MachineGroup's: each kind has its own).
  virtual Expected<void> connect(const std::string& name) = 0;

  MachineGroup& group(const std::string& name) { return *groups_.at(name); }
  // What agent `name` says, recorded with the instant.
  Notify notifier(const std::string& name) {
    return [this, name](const std::string& line) {
      const int64_t at = world_->nowMs();
      std::lock_guard lock(mutex_);
      said_[name].push_back(std::to_string(at) + " ms: " + line);
    };
  }

  // `name` connects (when `first`) at `arrive` and meets the others in its next round.
  std::function<void()> meets(const std::string& name, bool first,
                              std::chrono::milliseconds arrive = 0ms) {
    return [this, name, first, arrive] {
      world_->sleepUntil(SimWorld::at(arrive));
      if (first) {
        auto connected = connect(name);
        ASSERT_TRUE(connected.ok()) << name << ": " << connected.error();
      }
      auto p = group(name).meet();
      ASSERT_TRUE(p.ok()) << name << ": " << p.error();
      std::lock_guard lock(mutex_);
      placed_[name] = *p;
      met_ms_[name] = world_->nowMs();
    };
  }

  // `name` waits (at most 60 s) for its link's first event, then takes part in the round's end;
  // its ranks reached step `maxStep` (2 or more: some completed a step).
  std::function<void()> hearsAndEnds(const std::string& name, int64_t maxStep = 0) {
    return [this, name, maxStep] {
      RoundLink* link = group(name).link();
      ASSERT_TRUE(world_->awaitReadable(link->fd(), world_->now() + 60s)) << name << ": nothing";
      auto events = link->takeEvents();
      ASSERT_FALSE(events.empty()) << name;
      const Heard heard{world_->nowMs(), events.front()};
      AttemptReport last;
      last.max_step = maxStep;
      RoundDecision decided = group(name).endRound(last, false);
      std::lock_guard lock(mutex_);
      heard_[name] = heard;
      ended_[name] = last;
      decided_[name] = decided;
      decided_ms_[name] = world_->nowMs();
    };
  }

  // At `t`, `name`'s workers fail (local rank 0, exit `code`, `line` last): its link publishes
  // the failure; when the link says it stands (or another came first), the agent takes part in
  // the round's end.
  std::function<void()> failsAndEnds(const std::string& name, std::chrono::milliseconds t, int code,
                                     const std::string& line) {
    return at(t, [this, name, code, line] {
      JobFailure f;
      f.machine_rank = placed_.at(name).machine_rank;
      f.host = thisHostName();
      f.local_rank = 0;
      f.rank = placed_.at(name).rank_offset;
      f.exit_code = code;
      f.stderr_tail = {"Traceback (most recent call last):", line};
      ASSERT_TRUE(group(name).link()->publish(f)) << name;
      hearsAndEnds(name)();
    });
  }

  // At `t`, `what` (as a body of the world).
  std::function<void()> at(std::chrono::milliseconds t, std::function<void()> what) {
    return [this, t, what] {
      world_->sleepUntil(SimWorld::at(t));
      what();
    };
  }

  // `steps` one after the other, as one body.
  static std::function<void()> then(std::vector<std::function<void()>> steps) {
    return [steps] {
      for (const auto& step : steps) step();
    };
  }

  // Each of `names` heard the round's first event at `atMs`, of `kind`, and decided then — the
  // same decision — to restart, `counted` or not, as restart count `restartCount`.
  void expectRestart(const std::vector<std::string>& names, int64_t atMs, LinkEvent::Kind kind,
                     bool counted, int restartCount) {
    for (const auto& n : names) {
      EXPECT_EQ(heard_[n].at_ms, atMs) << n;
      EXPECT_EQ(heard_[n].event.kind, kind) << n;
      EXPECT_EQ(decided_ms_[n], atMs) << n;
      EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
      EXPECT_EQ(decided_[n].counted, counted) << n;
      EXPECT_EQ(decided_[n].restart_count, restartCount) << n;
      EXPECT_EQ(decided_[n].why, decided_[names.front()].why) << n;
    }
  }
  // Each of `names` met at `atMs` in round `round`, `worldSize` ranks in all, told restart count
  // `restartCount`.
  void expectMet(const std::vector<std::string>& names, int64_t atMs, int round, int worldSize,
                 int restartCount) {
    for (const auto& n : names) {
      EXPECT_EQ(met_ms_[n], atMs) << n;
      EXPECT_EQ(group(n).round(), round) << n;
      EXPECT_EQ(placed_[n].world_size, worldSize) << n;
      EXPECT_EQ(placed_[n].restart_count, restartCount) << n;
    }
  }

  // `name` meets its next round, which cannot form, and is interrupted at `t`: its meet() must
  // fail at that instant (not at a timeout, and not with a placement). Returns the error.
  std::string interruptedWhileMeeting(const std::string& name, std::chrono::milliseconds t) {
    std::optional<Expected<Placement>> met;
    int64_t metMs = -1;
    world_->run({[&] {
                   met.emplace(group(name).meet());
                   metMs = world_->nowMs();
                 },
                 at(t, [this, name] { group(name).interrupt(); })});
    if (!met.has_value()) return "no meet()";
    EXPECT_FALSE(met->ok()) << "round " << group(name).round() << " formed";
    if (met->ok()) return "";
    EXPECT_EQ(met->error().find("timed out"), std::string::npos) << met->error();
    EXPECT_EQ(metMs, t.count()) << met->error();
    return met->error();
  }

  bool said(const std::string& name, const std::string& line) {
    std::lock_guard lock(mutex_);
    for (const auto& l : said_[name]) {
      if (l == line) return true;
    }
    ADD_FAILURE() << name << " did not say \"" << line << "\"; it said:\n" << saidText(name);
    return false;
  }
  std::string saidText(const std::string& name) {
    std::string all;
    for (const auto& l : said_[name]) all += "  " + l + "\n";
    return all;
  }

  LaunchPlan plan_;
  probes::Environment env_;
  std::shared_ptr<SimWorld> world_ = std::make_shared<SimWorld>();
  std::mutex mutex_;  // what the bodies record:
  std::map<std::string, std::vector<std::string>> said_;
  std::map<std::string, Placement> placed_;
  std::map<std::string, int64_t> met_ms_, decided_ms_;
  std::map<std::string, Heard> heard_;
  std::map<std::string, RoundDecision> decided_;
  std::map<std::string, AttemptReport> ended_;  // what endRound() filled in
  // The groups, made by the subclass (declared last among what they use, so destroyed first).
  std::map<std::string, std::unique_ptr<MachineGroup>> groups_;
};

}  // namespace accel::launcher::testing
