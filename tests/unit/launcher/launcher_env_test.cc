// read_launcher_env: which launcher wins, how values are checked and what the errors say,
// through the EnvLookup injection (a fake environment), plus the real-environment form with a
// real inherited listening socket.
#include "core/launch/launcher_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"

namespace ccl {
namespace {

using Env = std::map<std::string, std::string>;

LauncherEnv read(const Env& env) {
  return read_launcher_env([&env](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

// Expects InvalidUsage with every one of `parts` in the message; returns the message.
std::string expect_usage_error(const Env& env, const std::vector<std::string>& parts) {
  try {
    read(env);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage) << e.what();
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << p;
    }
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

const Env kCclrun = {{"CCL_RANK", "2"},
                     {"CCL_WORLD_SIZE", "4"},
                     {"CCL_LOCAL_RANK", "2"},
                     {"CCL_COMM_ID", "127.0.0.1:29500"}};

TEST(LauncherEnv, NoLauncher) {
  std::string msg = expect_usage_error({{"CCL_COMM_ID", "127.0.0.1:1"}, {"PATH", "/bin"}}, {});
  EXPECT_EQ(msg,
            "cclCommInitFromEnv: no launcher variables found: start the program with cclrun, "
            "mpirun, srun or torchrun, or set CCL_RANK and CCL_WORLD_SIZE");
}

struct LauncherCase {
  Env vars;
  const char* launcher;
  int rank, nranks, local_rank;
};

TEST(LauncherEnv, EveryLauncher) {
  const std::vector<LauncherCase> cases = {
      {{{"CCL_RANK", "2"}, {"CCL_WORLD_SIZE", "4"}, {"CCL_LOCAL_RANK", "1"}}, "cclrun", 2, 4, 1},
      {{{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "3"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}},
       "openmpi",
       1,
       3,
       0},
      {{{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"}}, "mpich", 5, 8, 1},
      {{{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "3"}}, "slurm", 3, 4, 3},
      {{{"RANK", "6"}, {"WORLD_SIZE", "7"}, {"LOCAL_RANK", "2"}}, "torchrun", 6, 7, 2},
      // No local rank given: -1.
      {{{"RANK", "0"}, {"WORLD_SIZE", "1"}}, "torchrun", 0, 1, -1},
      {{{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}, "mpich", 0, 2, -1},
  };
  for (const auto& c : cases) {
    Env env = c.vars;
    env["CCL_COMM_ID"] = "10.1.2.3:4567";
    LauncherEnv got = read(env);
    EXPECT_EQ(got.launcher, c.launcher);
    EXPECT_EQ(got.rank, c.rank) << c.launcher;
    EXPECT_EQ(got.nranks, c.nranks) << c.launcher;
    EXPECT_EQ(got.local_rank, c.local_rank) << c.launcher;
    EXPECT_EQ(got.address, "10.1.2.3:4567");
    EXPECT_EQ(got.secret, Secret{});
    EXPECT_EQ(got.listen_fd, -1);
  }
}

TEST(LauncherEnv, Precedence) {
  // Every launcher's variables at once, each with its own rank; remove the winner each time.
  Env env = {{"CCL_COMM_ID", "h:1"},
             {"CCL_RANK", "0"},
             {"CCL_WORLD_SIZE", "10"},
             {"OMPI_COMM_WORLD_RANK", "1"},
             {"OMPI_COMM_WORLD_SIZE", "10"},
             {"PMI_RANK", "2"},
             {"PMI_SIZE", "10"},
             {"SLURM_PROCID", "3"},
             {"SLURM_NTASKS", "10"},
             {"RANK", "4"},
             {"WORLD_SIZE", "10"}};
  const std::vector<std::pair<const char*, std::vector<const char*>>> order = {
      {"cclrun", {"CCL_RANK", "CCL_WORLD_SIZE"}},
      {"openmpi", {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}},
      {"mpich", {"PMI_RANK", "PMI_SIZE"}},
      {"slurm", {"SLURM_PROCID", "SLURM_NTASKS"}},
      {"torchrun", {"RANK", "WORLD_SIZE"}},
  };
  for (size_t i = 0; i < order.size(); ++i) {
    LauncherEnv got = read(env);
    EXPECT_EQ(got.launcher, order[i].first);
    EXPECT_EQ(got.rank, static_cast<int>(i));
    for (const char* name : order[i].second) env.erase(name);
  }
  expect_usage_error(env, {"no launcher variables found"});
}

TEST(LauncherEnv, TorchrunUnderSrun) {
  // `srun torchrun`: SLURM_PROCID is the node's task, not the worker's rank.
  Env env = {{"SLURM_PROCID", "1"},   {"SLURM_NTASKS", "2"}, {"RANK", "5"},
             {"WORLD_SIZE", "8"},     {"LOCAL_RANK", "1"},   {"MASTER_ADDR", "node0"},
             {"MASTER_PORT", "29500"}};
  EXPECT_EQ(read(env).launcher, "slurm");
  env["TORCHELASTIC_RUN_ID"] = "job7";
  LauncherEnv got = read(env);
  EXPECT_EQ(got.launcher, "torchrun");
  EXPECT_EQ(got.rank, 5);
  EXPECT_EQ(got.nranks, 8);
  EXPECT_EQ(got.local_rank, 1);
  EXPECT_EQ(got.address, "node0:29500");
}

TEST(LauncherEnv, MalformedRankAndSize) {
  const std::vector<std::pair<const char*, std::string>> bad = {
      {"CCL_RANK", ""},
      {"CCL_RANK", "abc"},
      {"CCL_RANK", "1O"},
      {"CCL_RANK", " 1"},
      {"CCL_RANK", "1 "},
      {"CCL_RANK", "+1"},
      {"CCL_RANK", "1.0"},
      {"CCL_RANK", "0x1"},
      {"CCL_RANK", "99999999999"},
      {"CCL_RANK", "-1"},
      {"CCL_RANK", "4"},
      {"CCL_RANK", "5"},
      {"CCL_WORLD_SIZE", "0"},
      {"CCL_WORLD_SIZE", "-4"},
      {"CCL_WORLD_SIZE", "four"},
      {"CCL_LOCAL_RANK", "x"},
      {"CCL_LOCAL_RANK", "-1"},
      {"CCL_LOCAL_RANK", "4"},
      {"CCL_BOOTSTRAP_LISTEN_FD", "x"},
      {"CCL_BOOTSTRAP_LISTEN_FD", "-3"},
  };
  for (const auto& [name, value] : bad) {
    SCOPED_TRACE(std::string(name) + "='" + value + "'");
    Env env = kCclrun;
    env[name] = value;
    // The message names the variable, and the value as written.
    expect_usage_error(env, {std::string(name) + "='" + value + "'"});
  }
}

TEST(LauncherEnv, RankOutOfRange) {
  Env env = kCclrun;
  env["CCL_WORLD_SIZE"] = "2";
  expect_usage_error(env, {"CCL_RANK='2' is out of range [0, 2)"});
  env["CCL_RANK"] = env["CCL_LOCAL_RANK"] = "1";
  EXPECT_EQ(read(env).rank, 1);
}

TEST(LauncherEnv, HalfALauncher) {
  expect_usage_error({{"CCL_RANK", "0"}, {"CCL_COMM_ID", "h:1"}},
                     {"CCL_RANK is set but CCL_WORLD_SIZE is not"});
  expect_usage_error({{"WORLD_SIZE", "2"}, {"CCL_COMM_ID", "h:1"}},
                     {"WORLD_SIZE is set but RANK is not"});
}

TEST(LauncherEnv, MissingAddress) {
  Env env = kCclrun;
  env.erase("CCL_COMM_ID");
  expect_usage_error(env, {"cclrun", "set CCL_COMM_ID=host:port (or MASTER_ADDR and MASTER_PORT)"});
  Env ompi = {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  expect_usage_error(ompi, {"openmpi", "set CCL_COMM_ID=host:port"});
  ompi["MASTER_ADDR"] = "10.0.0.1";
  expect_usage_error(ompi, {"MASTER_ADDR is set but MASTER_PORT is not"});
  ompi.erase("MASTER_ADDR");
  ompi["MASTER_PORT"] = "29500";
  expect_usage_error(ompi, {"MASTER_PORT is set but MASTER_ADDR is not"});
}

TEST(LauncherEnv, Addresses) {
  struct Case {
    Env vars;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{{"CCL_COMM_ID", "10.0.0.1:29500"}}, "10.0.0.1:29500"},
      {{{"CCL_COMM_ID", "node01.cluster:1"}}, "node01.cluster:1"},
      {{{"CCL_COMM_ID", "[::1]:29500"}}, "[::1]:29500"},
      {{{"CCL_COMM_ID", "[fe80::1%eth0]:65535"}}, "[fe80::1%eth0]:65535"},
      {{{"MASTER_ADDR", "10.0.0.2"}, {"MASTER_PORT", "29501"}}, "10.0.0.2:29501"},
      {{{"MASTER_ADDR", "::1"}, {"MASTER_PORT", "29502"}}, "[::1]:29502"},
      {{{"MASTER_ADDR", "[::1]"}, {"MASTER_PORT", "29503"}}, "[::1]:29503"},
      {{{"MASTER_ADDR", "localhost"}, {"MASTER_PORT", "80"}}, "localhost:80"},
      // CCL_COMM_ID wins over MASTER_*.
      {{{"CCL_COMM_ID", "a:1"}, {"MASTER_ADDR", "b"}, {"MASTER_PORT", "2"}}, "a:1"},
  };
  for (const auto& c : cases) {
    Env env = c.vars;
    env["RANK"] = "0";
    env["WORLD_SIZE"] = "2";
    EXPECT_EQ(read(env).address, c.want);
  }
}

TEST(LauncherEnv, BadAddresses) {
  const std::vector<std::pair<const char*, std::string>> bad_comm_id = {
      {"CCL_COMM_ID", ""},           {"CCL_COMM_ID", "host"},    {"CCL_COMM_ID", "host:"},
      {"CCL_COMM_ID", ":29500"},     {"CCL_COMM_ID", "host:0"},  {"CCL_COMM_ID", "host:65536"},
      {"CCL_COMM_ID", "host:x"},     {"CCL_COMM_ID", "host:-1"}, {"CCL_COMM_ID", "::1:29500"},
      {"CCL_COMM_ID", "[::1]29500"}, {"CCL_COMM_ID", "[::1"},    {"CCL_COMM_ID", "[::1]:"},
      {"CCL_COMM_ID", "[]:1"},
  };
  for (const auto& [name, value] : bad_comm_id) {
    SCOPED_TRACE(value);
    Env env = kCclrun;
    env[name] = value;
    expect_usage_error(env, {std::string(name) + "='" + value + "'"});
  }
  Env env = kCclrun;
  env.erase("CCL_COMM_ID");
  env["MASTER_ADDR"] = "10.0.0.1";
  for (const std::string port : {"", "x", "0", "70000", "29500 "}) {
    env["MASTER_PORT"] = port;
    expect_usage_error(env, {"MASTER_PORT='" + port + "'"});
  }
  env["MASTER_PORT"] = "29500";
  env["MASTER_ADDR"] = "";
  expect_usage_error(env, {"MASTER_ADDR is empty"});
  env["MASTER_ADDR"] = "[::1";
  expect_usage_error(env, {"MASTER_ADDR"});
}

TEST(LauncherEnv, Secret) {
  Env env = kCclrun;
  EXPECT_EQ(read(env).secret, Secret{});
  env["CCL_COMM_SECRET"] = "00112233445566778899aabbccddeeff";
  Secret want = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
  EXPECT_EQ(read(env).secret, want);
  env["CCL_COMM_SECRET"] = "00112233445566778899AABBCCDDEEFF";
  EXPECT_EQ(read(env).secret, want);
  for (const std::string bad :
       {"", "abc", "00112233445566778899aabbccddeef", "00112233445566778899aabbccddeeff0",
        "0011223344556677zz99aabbccddeeff"}) {
    env["CCL_COMM_SECRET"] = bad;
    std::string msg = expect_usage_error(env, {"CCL_COMM_SECRET is malformed", "32 hex digits"});
    // Not echoed, even when malformed.
    if (!bad.empty()) {
      EXPECT_EQ(msg.find(bad), std::string::npos) << msg;
    }
  }
}

TEST(LauncherEnv, ListenFd) {
  Env env = kCclrun;
  env["CCL_RANK"] = "0";
  env["CCL_BOOTSTRAP_LISTEN_FD"] = "7";
  EXPECT_EQ(read(env).listen_fd, 7);
  // Only rank 0 takes it; elsewhere it is ignored.
  env["CCL_RANK"] = "1";
  EXPECT_EQ(read(env).listen_fd, -1);
}

// The real-environment form: clears every variable the reader looks at, restores them after.
class RealEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"CCL_RANK",
                             "CCL_WORLD_SIZE",
                             "CCL_LOCAL_RANK",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK",
                             "PMI_RANK",
                             "PMI_SIZE",
                             "MPI_LOCALRANKID",
                             "SLURM_PROCID",
                             "SLURM_NTASKS",
                             "SLURM_LOCALID",
                             "RANK",
                             "WORLD_SIZE",
                             "LOCAL_RANK",
                             "TORCHELASTIC_RUN_ID",
                             "CCL_COMM_ID",
                             "MASTER_ADDR",
                             "MASTER_PORT",
                             "CCL_COMM_SECRET",
                             "CCL_BOOTSTRAP_LISTEN_FD"}) {
      if (const char* v = getenv(name)) saved_[name] = v;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : {"CCL_RANK", "CCL_WORLD_SIZE", "CCL_COMM_ID", "CCL_BOOTSTRAP_LISTEN_FD",
                             "CCL_COMM_SECRET"}) {
      unsetenv(name);
    }
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
    if (fd_ >= 0) close(fd_);
  }
  // A listening socket on 127.0.0.1; returns its port.
  int listen_socket() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    return ntohs(addr.sin_port);
  }
  void set_cclrun_env(int port, int fd) {
    setenv("CCL_RANK", "0", 1);
    setenv("CCL_WORLD_SIZE", "2", 1);
    setenv("CCL_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    setenv("CCL_BOOTSTRAP_LISTEN_FD", std::to_string(fd).c_str(), 1);
  }

  std::map<std::string, std::string> saved_;
  int fd_ = -1;
};

TEST_F(RealEnvTest, InheritedSocket) {
  int port = listen_socket();
  set_cclrun_env(port, fd_);
  setenv("CCL_COMM_SECRET", "ffffffffffffffffffffffffffffffff", 1);
  LauncherEnv env = read_launcher_env();
  EXPECT_EQ(env.launcher, "cclrun");
  EXPECT_EQ(env.listen_fd, fd_);
  EXPECT_EQ(env.secret[15], 0xff);
  // Kept from leaking into what rank 0 itself starts.
  EXPECT_TRUE(fcntl(fd_, F_GETFD) & FD_CLOEXEC);
}

TEST_F(RealEnvTest, StaleSocketRejected) {
  int port = listen_socket();
  // Another port: the socket belongs to some other job.
  set_cclrun_env(port == 65535 ? 1 : port + 1, fd_);
  EXPECT_THROW(read_launcher_env(), Error);
  // Not a socket at all.
  int file = open("/dev/null", O_RDONLY);
  set_cclrun_env(port, file);
  try {
    read_launcher_env();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("CCL_BOOTSTRAP_LISTEN_FD=" + std::to_string(file)),
              std::string::npos)
        << e.what();
  }
  close(file);
  // A closed descriptor.
  set_cclrun_env(port, 1000000);
  EXPECT_THROW(read_launcher_env(), Error);
}

TEST_F(RealEnvTest, NothingSet) { EXPECT_THROW(read_launcher_env(), Error); }

// torchrun's workers see TORCHELASTIC_USE_AGENT_STORE=True: MASTER_ADDR:MASTER_PORT is the
// agent's TCPStore, which the rendezvous goes through (torch_store_client.h), not a port for
// rank 0 to listen on. CCL_COMM_ID still wins; without the agent store it is the plain address.
TEST(LauncherEnv, TorchrunRendezvousesThroughTheAgentStore) {
  Env env = {{"RANK", "1"},
             {"WORLD_SIZE", "2"},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", "29500"},
             {"TORCHELASTIC_USE_AGENT_STORE", "True"},
             {"TORCHELASTIC_RUN_ID", "job7"},
             {"TORCHELASTIC_RESTART_COUNT", "2"}};
  LauncherEnv got = read(env);
  EXPECT_TRUE(got.torch_store);
  EXPECT_EQ(got.address, "127.0.0.1:29500");
  EXPECT_EQ(got.torch_store_prefix, "ccl/job7/2");
  env["CCL_COMM_ID"] = "10.0.0.1:1234";
  got = read(env);
  EXPECT_FALSE(got.torch_store);
  EXPECT_EQ(got.address, "10.0.0.1:1234");
  env.erase("CCL_COMM_ID");
  env.erase("TORCHELASTIC_USE_AGENT_STORE");
  got = read(env);
  EXPECT_FALSE(got.torch_store);
  // An Open MPI job that happens to carry the variable is not torchrun.
  env = {{"OMPI_COMM_WORLD_RANK", "0"},
         {"OMPI_COMM_WORLD_SIZE", "2"},
         {"MASTER_ADDR", "h"},
         {"MASTER_PORT", "1"},
         {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  EXPECT_FALSE(read(env).torch_store);
}

}  // namespace
}  // namespace ccl
