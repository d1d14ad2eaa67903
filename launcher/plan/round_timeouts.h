#pragma once
// RoundTimeouts: every duration of a multi-machine job's rounds, in one value (torch's
// RendezvousTimeout is the model). The first group is the user's — each named by the flag or
// the --rdzv_conf key it comes from, torch's spelling where torch has one — filled once by
// planning (LaunchPlan::round_timeouts, applyRendezvousFlags) and never changed; the second is
// accel's own, fixed here so that a reader finds every wait of a round in one place.

#include <chrono>

namespace accel::launcher {

struct RoundTimeouts {
  using ms = std::chrono::milliseconds;
  using s = std::chrono::seconds;

  // --- The user's ---
  // --rdzv_timeout, or timeout= / join_timeout= in --rdzv_conf: a round must form within it.
  ms join = s(900);
  // last_call_timeout=: once MIN machines joined, how long more may join the round.
  ms last_call = s(30);
  // keep_alive_interval= and keep_alive_max_attempt=: every agent's keep-alive period; a member
  // whose keep-alive did not move for interval x misses went silent and is lost.
  ms keep_alive_interval = s(1);
  int keep_alive_misses = 3;
  // close_timeout=, else --term_timeout + close_margin: how long the master waits for every
  // member's end of a failed round (their workers' grace, and what the last of them needs to
  // leave).
  ms close = s(35);
  // --term_timeout + exit_margin: how long the master keeps its store for the others once a
  // failure was published (they only need it to read the failure and leave).
  ms exit_after_failure = s(15);

  // --- accel's own ---
  ms close_margin = s(30);        // close's default beyond --term_timeout
  ms exit_margin = s(10);         // exit_after_failure beyond --term_timeout
  ms progress = s(5);             // between the master's "2/3 machines joined" notices
  ms presence_check = ms(100);    // the master's look at the members (presence, keep-alives)
  ms presence_grace = ms(500);    // a registration read before its agent's presence was parked
  ms connect = s(30);             // a second connection to the master's store
  ms connect_progress = s(10);    // between "waiting for the master agent at ..." notices
  ms request = s(5);              // a link's request; longer is a master gone quiet
  ms keep_alive_retry = ms(200);  // a keep-alive's fresh connection try while its path is down
  ms record = s(30);              // a record already counted (registration, failure) to appear
  ms report_record = s(2);        // a round-end report already counted to appear
  ms decision_margin = s(10);     // the others wait close + this for the master's decision
  ms answer_margin = s(2);        // the others wait this longer than the master for a round's
                                  // assignment, so that a master that gives up can say why
  ms publish = s(5);  // an attempt whose workers all ended waits this for its failure's publication
  ms stop_said = s(2);          // an agent told to stop says so in passing, at most this long
  ms round_end_poll = ms(100);  // the master's look at lost members while ends are missing
  ms exit_poll = ms(20);        // the exit barrier's look at the finished count
  ms exit_notice = s(1);        // the master says it waits in the exit barrier after this long
  ms failure_read = s(5);       // the round's failure, read once the round ended
  // On the store: a machine of an elastic job that lost the master's store (its link down, or
  // machine 0 gone) knocks every knock_every, for reach_again at most, before it gives up; once
  // the store answers it joins again as a newcomer. A store that refuses connections is gone.
  ms reach_again = s(60), knock_every = s(1);
  // On etcd: a link's call, in all and on one endpoint (so that stopping it never waits longer
  // when etcd is gone).
  ms etcd_link_call = s(2), etcd_link_try = s(1);
  // On etcd: a watch that ended is opened again after this (the link's thread).
  ms etcd_watch_retry = ms(200);
  // On etcd, the lease's renewals: each bounded by keep_alive_interval in all, but never less
  // than etcd_renewal_least (a round trip under load), each endpoint's share of it at least
  // etcd_endpoint_try_least; a renewal that failed tried again after etcd_renewal_retry (or the
  // interval, when shorter).
  ms etcd_renewal_least = ms(200), etcd_endpoint_try_least = ms(100), etcd_renewal_retry = ms(200);
  // TCP keep-alives on the failure watch (its connection waits on the master for the whole
  // round): a master whose machine or link vanishes without closing it is noticed after
  // idle + probes x interval.
  s watch_idle = s(2), watch_interval = s(1);
  int watch_probes = 3;
};

}  // namespace accel::launcher
