#include "libaccel/comm/gloo_communicator.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#if ACCEL_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include "accel/error.h"
#include "libaccel/comm/store_turn.h"

namespace accel::comm {
namespace {

#if ACCEL_HAVE_GLOO
c10d::ReduceOp toC10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return c10d::ReduceOp::SUM;
    case ReduceOp::Max:
      return c10d::ReduceOp::MAX;
    case ReduceOp::Min:
      return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

class C10dWork : public Work {
 public:
  explicit C10dWork(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      throw Error(std::string("collective failed: ") + e.what());
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
};

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> group, int rank, int size)
      : group_(std::move(group)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "gloo"; }

  std::unique_ptr<Work> allreduceAsync(at::Tensor& tensor, ReduceOp op) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = toC10d(op);
    return std::make_unique<C10dWork>(group_->allreduce(tensors, options));
  }

  void broadcast(at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    C10dWork(group_->broadcast(tensors, options)).wait();
  }

  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size_; ++r) outputs[0].push_back(at::empty_like(tensor));
    std::vector<at::Tensor> inputs{tensor.contiguous()};
    C10dWork(group_->allgather(outputs, inputs)).wait();
    return outputs[0];
  }

  void barrier() override { C10dWork(group_->barrier()).wait(); }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  int rank_;
  int size_;
};
#endif  // ACCEL_HAVE_GLOO

class SingleProcessCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "single"; }
  std::unique_ptr<Work> allreduceAsync(at::Tensor&, ReduceOp) override {
    struct Done : Work {
      void wait() override {}
    };
    return std::make_unique<Done>();
  }
  void broadcast(at::Tensor&, int) override {}
  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override { return {tensor.clone()}; }
  void barrier() override {}
};

}  // namespace

std::string localAddressFor(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) return "";
  std::string out;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {  // UDP connect: no packet
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char buf[INET_ADDRSTRLEN] = {0};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf)) {
      out = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return out;
}

#if !ACCEL_HAVE_GLOO
std::unique_ptr<Communicator> makeGlooCommunicator(c10::intrusive_ptr<c10d::Store>, int rank,
                                                   int size, const GlooOptions&) {
  throw Error("rank " + std::to_string(rank) + " of " + std::to_string(size) +
              ": this libaccel has no Gloo communicator: the LibTorch it was built against ships "
              "no Gloo headers (pip's torch does not). CPU ranks on one machine use shared memory "
              "and GPUs NCCL; for CPU ranks across machines, build libaccel against a LibTorch "
              "with Gloo's headers (Debian's libtorch-dev)");
}
#else
std::unique_ptr<Communicator> makeGlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, const GlooOptions& options) {
  auto gloo = c10d::ProcessGroupGloo::Options::create();
  gloo->timeout = options.timeout;
  try {
    if (!options.interface.empty()) {
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(options.interface));
    } else {
      // Gloo's default resolves this host's name, which Debian maps to 127.0.0.1: wrong as soon
      // as the job spans hosts. Bind the address that routes to the job's master instead.
      std::string local = localAddressFor(options.peer_host);
      ACCEL_CHECK(!local.empty(), "cannot find a local address that reaches ", options.peer_host,
                  " (set GLOO_SOCKET_IFNAME)");
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
    }
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        storeForThisTurn(std::move(store), "gloo", rank), rank, size, gloo);
    return std::make_unique<GlooCommunicator>(std::move(group), rank, size);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw NetworkError("rank " + std::to_string(rank) + " of " + std::to_string(size) +
                       ": cannot create the Gloo process group: " + e.what());
  }
}
#endif  // ACCEL_HAVE_GLOO

}  // namespace accel::comm

namespace accel {
std::unique_ptr<Communicator> makeSingleProcessCommunicator() {
  return std::make_unique<comm::SingleProcessCommunicator>();
}
}  // namespace accel
