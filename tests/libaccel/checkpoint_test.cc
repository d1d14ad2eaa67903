// Checkpoints that survive crashes and say what is wrong: saveState stages into a temporary
// directory and swaps it into place, every rank creates what it writes, every write is
// checked, and loadState names the missing, torn or unparsable file. Ranks as processes
// restore their own RNG state.

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "accel/accelerator.h"
#include "accel/error.h"
#include "libaccel/common/remove_tree.h"
#include "tests/libaccel/world.h"

namespace fs = std::filesystem;

namespace accel {
namespace {

struct Net : torch::nn::Module {
  explicit Net(int64_t width = 16) {
    fc1 = register_module("fc1", torch::nn::Linear(8, width));
    fc2 = register_module("fc2", torch::nn::Linear(width, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

std::vector<torch::Tensor> snapshot(torch::nn::Module& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

// One training step on fixed data, so the optimizer has state to save.
void trainStep(Accelerator& acc, Net& net) {
  acc.accumulate();
  acc.backward(net.forward(torch::ones({4, 8})).pow(2).sum());
  acc.step();
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::string contentOf(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::map<std::string, std::string> filesOf(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& name : entries(dir)) out[name] = contentOf(dir / name);
  return out;
}

// The message of the accel::Error `fn` throws ("" and a test failure when it throws none).
std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no accel::Error";
  return "";
}

// A world of one with a model, an optimizer with state, and a checkpoint directory.
class CheckpointFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/accel-ckpt-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ckpt_ = base_ / "run" / "ckpt";  // the parent does not exist yet: saveState creates it
    torch::manual_seed(0);
    net_ = std::make_shared<Net>(width_);
    opt_ = std::make_unique<torch::optim::Adam>(net_->parameters(), 1e-2);
    acc_ = std::make_unique<Accelerator>(testing::optionsFor(makeSingleProcessCommunicator(), 0));
    acc_->prepare(*net_, *opt_);
    trainStep(*acc_, *net_);
  }
  void TearDown() override { removeTree(base_.string()); }

  // Saves the current state as the "previous" checkpoint, then trains on so that the
  // in-memory state differs from it. Returns the saved parameters.
  std::vector<torch::Tensor> saveThenTrain() {
    acc_->saveState(ckpt_.string());
    auto saved = snapshot(*net_);
    trainStep(*acc_, *net_);
    EXPECT_FALSE(same(snapshot(*net_), saved));
    return saved;
  }

  // A fresh model loading the checkpoint; returns its parameters.
  std::vector<torch::Tensor> loadFresh() {
    torch::manual_seed(42);
    Net net(width_);
    torch::optim::Adam opt(net.parameters(), 1e-2);
    Accelerator acc(testing::optionsFor(makeSingleProcessCommunicator(), 0));
    acc.prepare(net, opt);
    acc.loadState(ckpt_.string());
    return snapshot(net);
  }

  int64_t width_ = 16;
  fs::path base_, ckpt_;
  std::shared_ptr<Net> net_;
  std::unique_ptr<torch::optim::Adam> opt_;
  std::unique_ptr<Accelerator> acc_;
};

TEST_F(CheckpointFilesTest, SaveReplacesThePreviousCheckpointAndLeavesNoStaging) {
  saveThenTrain();
  const auto now = snapshot(*net_);
  acc_->saveState(ckpt_.string() + "/");  // a trailing slash names the same directory
  EXPECT_EQ(entries(base_ / "run"), std::set<std::string>{"ckpt"})
      << "staging directories or claims left over";
  EXPECT_EQ(entries(ckpt_), (std::set<std::string>{"accel_state.json", "model.pt", "optimizer.pt",
                                                   "random_states_0.pt", "scaler.json"}));
  EXPECT_TRUE(same(loadFresh(), now));
}

TEST_F(CheckpointFilesTest, LeftoversOfAnInterruptedSaveAreRemovedByTheNextOne) {
  fs::create_directories(base_ / "run" / ".ckpt.tmp-00000000deadbeef");
  std::ofstream(base_ / "run" / ".ckpt.tmp-00000000deadbeef" / "model.pt") << "half";
  fs::create_directories(base_ / "run" / "other");
  acc_->saveState(ckpt_.string());
  EXPECT_EQ(entries(base_ / "run"), (std::set<std::string>{"ckpt", "other"}));
}

TEST_F(CheckpointFilesTest, RefusesToReplaceADirectoryThatIsNotACheckpoint) {
  fs::create_directories(ckpt_);
  std::ofstream(ckpt_ / "notes.txt") << "mine";
  const std::string error = errorOf([&] { acc_->saveState(ckpt_.string()); });
  EXPECT_NE(error.find("checkpoint directory '" + ckpt_.string() + "' holds 'notes.txt'"),
            std::string::npos)
      << error;
  EXPECT_EQ(entries(ckpt_), std::set<std::string>{"notes.txt"});
  EXPECT_EQ(entries(base_ / "run"), std::set<std::string>{"ckpt"});
}

TEST_F(CheckpointFilesTest, TruncatedModelFileIsAnErrorNamingIt) {
  saveThenTrain();
  const auto before = snapshot(*net_);
  fs::resize_file(ckpt_ / "model.pt", fs::file_size(ckpt_ / "model.pt") / 2);
  const std::string error = errorOf([&] { acc_->loadState(ckpt_.string()); });
  EXPECT_NE(error.find("checkpoint file '" + (ckpt_ / "model.pt").string() + "' is torn"),
            std::string::npos)
      << error;
  EXPECT_TRUE(same(snapshot(*net_), before)) << "a failed load changed the model";
}

TEST_F(CheckpointFilesTest, CorruptModelFileIsAnErrorNamingIt) {
  saveThenTrain();
  const auto size = fs::file_size(ckpt_ / "model.pt");
  fs::remove(ckpt_ / "model.pt");
  std::ofstream(ckpt_ / "model.pt") << std::string(size, 'x');  // the recorded size, not an archive
  const std::string error = errorOf([&] { acc_->loadState(ckpt_.string()); });
  EXPECT_NE(error.find("checkpoint file '" + (ckpt_ / "model.pt").string() +
                       "' is torn or not a LibTorch archive"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointFilesTest, MissingRankFileIsAnErrorNamingIt) {
  saveThenTrain();
  fs::remove(ckpt_ / "random_states_0.pt");
  const std::string error = errorOf([&] { acc_->loadState(ckpt_.string()); });
  EXPECT_NE(
      error.find("checkpoint file '" + (ckpt_ / "random_states_0.pt").string() + "' is missing"),
      std::string::npos)
      << error;
}

TEST_F(CheckpointFilesTest, BadJsonIsAnErrorNamingIt) {
  saveThenTrain();
  const std::string state = contentOf(ckpt_ / "accel_state.json");
  std::ofstream(ckpt_ / "accel_state.json") << state.substr(0, state.size() / 2);
  std::string error = errorOf([&] { acc_->loadState(ckpt_.string()); });
  EXPECT_NE(error.find("checkpoint file '" + (ckpt_ / "accel_state.json").string() +
                       "' is not valid JSON"),
            std::string::npos)
      << error;
  std::ofstream(ckpt_ / "accel_state.json") << state;
  std::ofstream(ckpt_ / "scaler.json") << R"({"scale": "big", "growth_tracker": 0})";
  error = errorOf([&] { acc_->loadState(ckpt_.string()); });
  EXPECT_NE(error.find("checkpoint file '" + (ckpt_ / "scaler.json").string() +
                       "': bad or missing 'scale'"),
            std::string::npos)
      << error;
}

// A checkpoint a GPU job saved (device_rng, and its device generator's file) loads on the CPU:
// the device's file is not read. The flag of another type is an error naming it.
TEST_F(CheckpointFilesTest, AGpuCheckpointLoadsOnTheCpuWithoutItsDeviceGenerator) {
  saveThenTrain();
  const auto saved = loadFresh();
  auto state = nlohmann::json::parse(contentOf(ckpt_ / "accel_state.json"));
  EXPECT_EQ(state.at("device_rng"), false);
  state["device_rng"] = true;
  std::ofstream(ckpt_ / "accel_state.json") << state.dump();
  std::ofstream(ckpt_ / "cuda_random_states_0.pt") << "not read on the CPU";
  EXPECT_TRUE(same(loadFresh(), saved));
  state["device_rng"] = 3;
  std::ofstream(ckpt_ / "accel_state.json") << state.dump();
  const std::string error = errorOf([&] { acc_->loadState(ckpt_.string()); });
  EXPECT_NE(error.find("checkpoint file '" + (ckpt_ / "accel_state.json").string() +
                       "': bad or missing 'device_rng'"),
            std::string::npos)
      << error;
}

// A model file larger than the file size limit: the write fails with EFBIG (SIGXFSZ ignored)
// or the process is killed by SIGXFSZ in the middle of it (a crash mid-save).
class FileSizeLimitTest : public CheckpointFilesTest {
 protected:
  FileSizeLimitTest() { width_ = 1024; }  // model.pt ≈ 45 KiB
  static void limitFileSize() {
    rlimit limit{};
    limit.rlim_cur = 16 << 10;
    limit.rlim_max = RLIM_INFINITY;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  }
};

TEST_F(FileSizeLimitTest, AFailedWriteIsAnErrorNamingTheFileAndKeepsThePreviousCheckpoint) {
  const auto saved = saveThenTrain();
  const auto previous = filesOf(ckpt_);
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &original), 0);
  auto* handler = ::signal(SIGXFSZ, SIG_IGN);
  limitFileSize();
  const std::string error = errorOf([&] { acc_->saveState(ckpt_.string()); });
  ::setrlimit(RLIMIT_FSIZE, &original);
  ::signal(SIGXFSZ, handler);
  EXPECT_NE(error.find("cannot write checkpoint file '"), std::string::npos) << error;
  EXPECT_NE(error.find("/model.pt': File too large"), std::string::npos) << error;
  EXPECT_EQ(filesOf(ckpt_), previous) << "the previous checkpoint changed";
  EXPECT_EQ(entries(base_ / "run"), std::set<std::string>{"ckpt"})
      << "the staging directory was left behind";
  EXPECT_TRUE(same(loadFresh(), saved));
}

TEST_F(FileSizeLimitTest, ACrashMidSaveLeavesThePreviousCheckpointWhole) {
  const auto saved = saveThenTrain();
  const auto previous = filesOf(ckpt_);
  EXPECT_EXIT(
      {
        ::signal(SIGXFSZ, SIG_DFL);
        limitFileSize();
        acc_->saveState(ckpt_.string());
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGXFSZ), "");
  EXPECT_EQ(filesOf(ckpt_), previous) << "the previous checkpoint changed";
  EXPECT_TRUE(same(loadFresh(), saved));
  // The next save removes what the crash left behind.
  acc_->saveState(ckpt_.string());
  EXPECT_EQ(entries(base_ / "run"), std::set<std::string>{"ckpt"});
}

// Machines without a shared file system: each rank's `dir` is its own (here two directories).
// Every rank creates the parents of what it writes; the main process's directory holds the
// model, each rank's holds its RNG state. A rank that cannot write makes every rank throw,
// and the others' previous checkpoints stay.
TEST(CheckpointRanksTest, EveryRankCreatesWhatItWritesWithoutASharedFileSystem) {
  char tmpl[] = "/tmp/accel-ckpt-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path base = tmpl;
  std::vector<std::shared_ptr<Net>> nets{std::make_shared<Net>(), std::make_shared<Net>()};
  std::vector<std::string> errors(2);
  std::vector<torch::Tensor> saved;
  testing::runRanks(2, [&](std::shared_ptr<Communicator> comm, int rank) {
    Net& net = *nets[static_cast<size_t>(rank)];
    torch::optim::Adam opt(net.parameters(), 1e-2);
    Accelerator acc(testing::optionsFor(comm, rank));
    acc.prepare(net, opt);
    trainStep(acc, net);
    const fs::path mine = base / ("machine" + std::to_string(rank)) / "ckpt";
    acc.saveState(mine.string());
    if (rank == 0) saved = snapshot(net);
    trainStep(acc, net);
    // Rank 1's path is now a file: it cannot save, so no rank may.
    if (rank == 1) std::ofstream(base / "machine1" / "blocked") << "x";
    const fs::path second = rank == 0 ? mine : base / "machine1" / "blocked";
    errors[static_cast<size_t>(rank)] = errorOf([&] { acc.saveState(second.string()); });
  });
  EXPECT_EQ(entries(base / "machine0" / "ckpt"),
            (std::set<std::string>{"accel_state.json", "model.pt", "optimizer.pt",
                                   "random_states_0.pt", "scaler.json"}));
  EXPECT_EQ(entries(base / "machine1" / "ckpt"), std::set<std::string>{"random_states_1.pt"});
  EXPECT_NE(errors[1].find("checkpoint path '" + (base / "machine1" / "blocked").string() +
                           "' exists and is not a directory"),
            std::string::npos)
      << errors[1];
  EXPECT_NE(errors[0].find("failed on rank(s) 1"), std::string::npos) << errors[0];
  EXPECT_EQ(entries(base / "machine0"), std::set<std::string>{"ckpt"});
  torch::serialize::InputArchive archive;
  archive.load_from((base / "machine0" / "ckpt" / "model.pt").string());
  Net restored;
  restored.load(archive);
  EXPECT_TRUE(same(snapshot(restored), saved))
      << "the failed save changed rank 0's previous checkpoint";
  removeTree(base.string());
}

// Ranks as processes (each has its own RNG, unlike threads): `body` runs on `world` forked
// processes joined by Gloo over a FileStore; returns each rank's exit status (0: success; a
// rank prints its error). Forking needs a single-threaded process, which each ctest case is.
int threadsOfThisProcess() {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/task")) n += e.is_directory() ? 1 : 0;
  return n;
}

std::vector<int> runRankProcesses(
    int world, const fs::path& storeFile,
    const std::function<void(std::shared_ptr<Communicator>, int)>& body) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        auto store = c10::make_intrusive<c10d::FileStore>(storeFile.string(), world);
        // 20 s: a rank that hangs fails, not the whole ctest run
        body(testing::makeCommunicator(testing::kCpuBackend, store, rank, world,
                                       std::chrono::seconds(20)),
             rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 1;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses;
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    statuses.push_back(status);
  }
  return statuses;
}

// Every rank's restored state: two processes train, save, draw random numbers and train on;
// two fresh processes (other seeds, other weights) load and must draw the same numbers, rank
// by rank (the ranks' numbers differ: each restores its own generator), and end with the same
// parameters on every rank.
TEST(CheckpointProcessesTest, EveryRankRestoresItsModelOptimizerStepAndRng) {
  if (threadsOfThisProcess() != 1)
    GTEST_SKIP() << "forks ranks, so it needs a single-threaded process (run it alone)";
  char tmpl[] = "/tmp/accel-ckpt-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path base = tmpl, ckpt = base / "ckpt";
  auto run = [&](const std::string& phase, bool resume) {
    return runRankProcesses(
        2, base / (phase + ".store"), [&](std::shared_ptr<Communicator> comm, int rank) {
          torch::manual_seed(resume ? 77 + rank : 0);
          Net net;
          torch::optim::Adam opt(net.parameters(), 1e-2);
          Accelerator acc(testing::optionsFor(comm, rank));
          acc.prepare(net, opt);
          acc.setSeed(resume ? 5 : 1000, /*deviceSpecific=*/true);
          if (resume) {
            acc.loadState(ckpt.string());
          } else {
            for (int s = 0; s < 2; ++s) trainStep(acc, net);
            acc.saveState(ckpt.string());
          }
          at::Tensor drawn = torch::rand({4});
          at::Tensor step = torch::full({1}, acc.stepCount(), torch::kLong);
          for (int s = 0; s < 2; ++s) trainStep(acc, net);
          std::vector<torch::Tensor> out{drawn, step};
          for (auto& p : snapshot(net)) out.push_back(p);
          torch::save(out, (base / (phase + std::to_string(rank) + ".pt")).string());
        });
  };
  EXPECT_EQ(run("first", false), (std::vector<int>{0, 0}));
  EXPECT_EQ(run("resumed", true), (std::vector<int>{0, 0}));
  std::vector<std::vector<torch::Tensor>> first(2), resumed(2);
  for (int r = 0; r < 2; ++r) {
    torch::load(first[r], (base / ("first" + std::to_string(r) + ".pt")).string());
    torch::load(resumed[r], (base / ("resumed" + std::to_string(r) + ".pt")).string());
    ASSERT_EQ(first[r].size(), resumed[r].size());
    EXPECT_TRUE(torch::equal(resumed[r][0], first[r][0]))
        << "rank " << r << " drew other numbers after loading";
    EXPECT_EQ(resumed[r][1].item<int64_t>(), 2) << "rank " << r << "'s step count";
    for (size_t i = 2; i < first[r].size(); ++i) {
      EXPECT_TRUE(torch::allclose(resumed[r][i], first[r][i], 1e-6, 1e-6))
          << "rank " << r << ", parameter " << i - 2;
    }
  }
  EXPECT_FALSE(torch::equal(first[0][0], first[1][0]))
      << "both ranks had the same generator: the test proves little";
  removeTree(base.string());
}

}  // namespace
}  // namespace accel
