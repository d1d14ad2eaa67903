#pragma once
// Every key the agents of one job keep in its store, named once: JobKeys for the job's own,
// RoundKeys for one round's. No other file spells a key of the agents. They all live under
// "accel/" (kAgentKeyPrefix), which workers' keys never use, so clearing the workers' keys
// between rounds keeps them; a job's live under accel/rdzv/<job id>/, so two jobs that reach one
// store never read each other's.
//
//   accel/job_id                          the job the store's host serves
//   accel/rdzv/<id>/open_round            the round the master opened last
//   accel/rdzv/<id>/presence/<token>      an agent's presence (a WAIT nobody answers)
//   accel/rdzv/<id>/stop/<R>              round R's stop record: its first failure, a lost
//                                         machine or one waiting to join (every agent
//                                         watches it)
//   accel/rdzv/<id>/status/<M>            machine M's `accel status` answer
//   accel/rdzv/<id>/round/<R>/            round R: arrivals, agent/<slot>, assignment,
//                                         members, places/<C>, alive/<M>, ends, end/<slot>,
//                                         decision, finished, finished/<M>; on etcd
//                                         (etcd/meeting.h) member/<token> (an agent's
//                                         registration), newcomer/<token> (one not in the
//                                         round before), record (the round's summary),
//                                         record/head (the agent that closes it),
//                                         places/<token>/<order> (its members in chunks) and
//                                         started/<M> (its agent lived past the close)
//   accel/rdzv/<id>/restarts              on etcd: the restarts used (for a machine arriving)
//
// The store's server sees a key as torch's clients store it, with a leading "/" (stored()).

#include <string>

namespace accel::launcher {

inline constexpr const char* kAgentKeyPrefix = "accel/";

class RoundKeys {
 public:
  RoundKeys(const std::string& jobPrefix, int round)
      : p_(jobPrefix + "round/" + std::to_string(round) + "/"),
        stop_(jobPrefix + "stop/" + std::to_string(round)) {}

  std::string arrivals() const { return p_ + "arrivals"; }  // registrations so far (a counter)
  std::string agent(int slot) const { return p_ + "agent/" + std::to_string(slot); }
  std::string assignment() const { return p_ + "assignment"; }  // the master's, or why not
  // The store's round, as the master assigned it: every member (read by the master alone) and
  // the places of registration slots [64 C, 64 C + 64) — each agent reads one chunk.
  std::string members() const { return p_ + "members"; }
  std::string places(int chunk) const { return p_ + "places/" + std::to_string(chunk); }
  static constexpr int kPlacesPerChunk = 64;
  std::string stop() const { return stop_; }  // what stopped the round first (its stop record)
  std::string alive(int machine) const { return p_ + "alive/" + std::to_string(machine); }
  std::string ends() const { return p_ + "ends"; }  // reports of the round's end (a counter)
  std::string end(int slot) const { return p_ + "end/" + std::to_string(slot); }
  // Leaderless (etcd): machine M's report of the round's end (no counter: nothing to contend on).
  std::string endOf(int machine) const { return p_ + "end-of/" + std::to_string(machine); }
  std::string decision() const { return p_ + "decision"; }       // the master's: restart or not
  std::string finishedCount() const { return p_ + "finished"; }  // the exit barrier's
  std::string finished(int machine) const { return p_ + "finished/" + std::to_string(machine); }
  // On etcd: machine M's agent took its place in the round (it lived past the round's close).
  std::string started(int machine) const { return p_ + "started/" + std::to_string(machine); }
  // On etcd (etcd/meeting.h): the round's keys, its agents' registrations, its record.
  std::string prefix() const { return p_; }
  std::string memberPrefix() const { return p_ + "member/"; }
  std::string member(const std::string& token) const { return memberPrefix() + token; }
  std::string record() const { return p_ + "record"; }
  // On etcd: the round's head (etcd/meeting.h), the agent that created it; under the record's
  // key, so that one watch of both tells a waiting agent the record made or the head gone.
  std::string head() const { return record() + "/head"; }
  // On etcd: the record's places, written by the agent `owner` that closed the round (its token):
  // chunks of members, each named by the order of its first (etcd/meeting.cc).
  std::string placesBy(const std::string& owner) const { return p_ + "places/" + owner + "/"; }
  // On etcd: a registration's mark when its agent was not a member of the round before (a
  // newcomer or a spare), for counting those waiting without reading every registration.
  std::string newcomerPrefix() const { return p_ + "newcomer/"; }
  std::string newcomer(const std::string& token) const { return newcomerPrefix() + token; }

 private:
  std::string p_, stop_;
};

class JobKeys {
 public:
  // `root`: where the keys live in a store several programs share (etcd; "": the top).
  explicit JobKeys(const std::string& jobId, const std::string& root = "")
      : p_(root + kAgentKeyPrefix + "rdzv/" + jobId + "/") {}

  static std::string jobId() { return std::string(kAgentKeyPrefix) + "job_id"; }
  std::string openRound() const { return p_ + "open_round"; }
  std::string presencePrefix() const { return p_ + "presence/"; }
  std::string presence(const std::string& token) const { return presencePrefix() + token; }
  std::string stopPrefix() const { return p_ + "stop/"; }
  std::string statusPrefix() const { return p_ + "status/"; }
  std::string restarts() const { return p_ + "restarts"; }
  std::string status(int machine) const { return statusPrefix() + std::to_string(machine); }
  RoundKeys round(int r) const { return RoundKeys(p_, r); }
  // Every key of the job starts with it (on etcd, what a finished job removes).
  std::string prefix() const { return p_; }

  // `key` as the store's server holds it (torch's clients prefix "/").
  static std::string stored(const std::string& key) { return "/" + key; }

 private:
  std::string p_;
};

}  // namespace accel::launcher
