// rdzv_wait PORT JOB_ID ROUND SLOT: returns once the agent of registration slot SLOT of round
// ROUND of job JOB_ID (--rdzv_id; "none" by default) is in the job's store on 127.0.0.1:PORT —
// the e2e cases' way to start the next agent only after the one before registered. The key is
// JobKeys' (launcher/rendezvous/job_keys.h), the one place the agents' keys are named. Exits 1
// with the store's message when it does not appear within 60 s.

#include <chrono>
#include <cstdio>
#include <string>

#include "launcher/rendezvous/round/keys.h"
#include "libaccel/store/tcp_store_client.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: rdzv_wait PORT JOB_ID ROUND SLOT\n");
    return 2;
  }
  try {
    accel::store::TcpStoreClientOptions o;
    o.port = std::stoi(argv[1]);
    accel::store::TcpStoreClient store(o);
    const auto key =
        accel::launcher::JobKeys(argv[2]).round(std::stoi(argv[3])).agent(std::stoi(argv[4]));
    store.wait({key}, std::chrono::seconds(60));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdzv_wait: %s\n", e.what());
    return 1;
  }
  return 0;
}
