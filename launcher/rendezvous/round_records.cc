#include "launcher/rendezvous/round_records.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "launcher/base/text.h"

namespace accel::launcher {

using nlohmann::json;

std::string storeLost(const GroupSettings& o, const std::string& why, bool mayComeBack) {
  if (o.leaderless) {
    return "lost contact with " + o.store_address + " (" + why +
           ") while the machines agreed on the round's end; this machine stops (the others, if "
           "they still reach etcd, decide without it)";
  }
  const std::string lost = "lost contact with the master agent's store at " + o.store_address +
                           " (" + why + "); this machine cannot go on without it";
  if (mayComeBack) {
    return lost +
           " until it reaches it again (if machine 0 is still up, this machine was cut off "
           "from it and the others go on without this one until it joins again)";
  }
  return lost +
         " (if machine 0 is still up, this machine was cut off from it and the others go "
         "on without this one)";
}

std::optional<RoundStop> publishStop(store::Store& s, const GroupSettings& o, int round,
                                     const RoundStop& mine) {
  try {
    const std::string record = encodeRoundStop(mine);
    const std::string stored = s.compareSet(roundKeys(o, round).stop(), "", record);
    if (stored == record) return std::nullopt;
    return decodeRoundStop(stored);
  } catch (const Error&) {
    return std::nullopt;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::optional<RoundStop> readStop(store::Store& s, const GroupSettings& o, int round,
                                  int machineRank) {
  RoundStop first = decodeRoundStop(s.get(roundKeys(o, round).stop(), o.timeouts.record));
  // This machine's own publication, unless the master found it lost.
  const auto& f = first.failure;
  if (f && f->machine_rank == machineRank && f->cause != kCauseLost) return std::nullopt;
  return first;
}

namespace {

// "1/2 machines reported their workers finished: this machine keeps the job's store up for the
// others, at most 14 s more"
std::string exitWaitText(int done, int machines, const std::optional<Clock::time_point>& deadline,
                         Clock::time_point now) {
  const std::string head = std::to_string(done) + "/" + std::to_string(machines) +
                           " machines reported their workers finished: this machine keeps the "
                           "job's store up for the others, ";
  if (!deadline) return head + "until they finish or leave";
  return head + "at most " + secondsText(std::chrono::ceil<std::chrono::seconds>(*deadline - now)) +
         " more";
}

// The host's side of the exit barrier: its own end counts without a call; it reads the others'
// count (and whether a failure was published) every exit_poll. A look its store did not answer
// in time (a store that serves thousands of agents) is looked again, not the barrier's end: these
// reads change nothing. Throws accel::Error when the store is gone.
int hostBarrier(store::Store& s, const GroupSettings& o, int round, int machines,
                std::chrono::milliseconds afterFailure, const std::function<bool()>& othersGone,
                const std::function<void(const std::string&)>& say) {
  const RoundKeys keys = roundKeys(o, round);
  std::optional<Clock::time_point> failureDeadline;
  const Clock::time_point noticeAt = o.clock->now() + o.timeouts.exit_notice;
  bool noticed = false;  // said that it waits (once)
  int done = 1;          // this one
  while (true) {
    try {
      done = 1 + static_cast<int>(s.add(keys.finishedCount(), 0));
      if (done >= machines) return done;
      if (!failureDeadline && s.check({keys.stop()}))
        failureDeadline = o.clock->now() + afterFailure;
    } catch (const TimeoutError&) {
      // looked at again after the pause
    }
    const auto now = o.clock->now();
    if ((othersGone && othersGone()) || (failureDeadline && now >= *failureDeadline)) return done;
    if (!noticed && now >= noticeAt) {
      noticed = true;
      if (say) say(exitWaitText(done, machines, failureDeadline, now));
    }
    o.clock->sleepUntil(o.clock->now() + o.timeouts.exit_poll);
  }
}

}  // namespace

int leaveRound(store::Store& store, const GroupSettings& settings, int round, int machineRank,
               int machines, bool host, const std::function<bool()>& othersGone,
               const std::function<void(const std::string&)>& say) {
  try {
    if (machineRank >= 0) store.set(roundKeys(settings, round).finished(machineRank), "1");
  } catch (const std::exception&) {
    // The barrier's own call tells whether the store is there.
  }
  const int done = exitBarrier(store, settings, round, machines, host,
                               settings.timeouts.exit_after_failure, othersGone, say);
  if (host && done < machines) {
    say("stopping the job's store although only " + std::to_string(std::max(done, 0)) + "/" +
        std::to_string(machines) + " machines reported their workers finished");
  }
  return done;
}

int exitBarrier(store::Store& s, const GroupSettings& o, int round, int machines, bool master,
                std::chrono::milliseconds afterFailure, const std::function<bool()>& othersGone,
                const std::function<void(const std::string&)>& say) {
  try {
    if (!master) return static_cast<int>(s.add(roundKeys(o, round).finishedCount(), 1));
    return hostBarrier(s, o, round, machines, afterFailure, othersGone, say);
  } catch (const Error& e) {
    // Said by the one that waits (it then stops the store): why it could not wait.
    if (master && say) say(std::string("the exit barrier cannot use the job's store: ") + e.what());
    return -1;
  }
}

}  // namespace accel::launcher
