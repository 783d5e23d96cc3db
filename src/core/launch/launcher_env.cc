#include "core/launch/launcher_env.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <charconv>
#include <cstdlib>
#include <limits>

#include "base/error.h"
#include "base/log.h"

namespace ccl {

namespace {

// The variables one launcher sets, in the order read_launcher_env tries them.
struct LauncherVars {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;
};

constexpr LauncherVars kLaunchers[] = {
    {"cclrun", "CCL_RANK", "CCL_WORLD_SIZE", "CCL_LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

// Strict: an optional '-' and decimal digits, nothing else (no spaces, no '+', no suffix), so a
// typo such as "1O" is an error rather than a silent 1.
bool parse_strict_int(const std::string& text, int* out) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  int value = 0;
  auto [ptr, ec] = std::from_chars(first, last, value, 10);
  if (ec != std::errc() || ptr != last) return false;
  *out = value;
  return true;
}

int read_int(const char* name, const std::string& text) {
  int value = 0;
  if (!parse_strict_int(text, &value)) {
    throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s='%s' is not an integer", name,
                text.c_str());
  }
  return value;
}

// Validates "host:port" / "[v6]:port" syntactically (no name resolution here: the bootstrap
// resolves when it connects) and returns the port.
int check_host_port(const char* name, const std::string& value) {
  std::string host, port;
  if (!value.empty() && value.front() == '[') {
    size_t close = value.find(']');
    if (close == std::string::npos || close + 1 >= value.size() || value[close + 1] != ':') {
      throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s='%s' is not [ipv6]:port", name,
                  value.c_str());
    }
    host = value.substr(1, close - 1);
    port = value.substr(close + 2);
  } else {
    size_t colon = value.rfind(':');
    if (colon == std::string::npos) {
      throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s='%s' is not host:port", name,
                  value.c_str());
    }
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      // "::1:29500" is ambiguous; insist on the bracketed form rather than guess.
      throw_error(cclInvalidUsage,
                  "cclCommInitFromEnv: %s='%s': write an IPv6 address in brackets, "
                  "e.g. [::1]:29500",
                  name, value.c_str());
    }
  }
  int port_number = 0;
  if (host.empty() || !parse_strict_int(port, &port_number) || port_number < 1 ||
      port_number > 65535) {
    throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s='%s' is not host:port (port 1..65535)",
                name, value.c_str());
  }
  return port_number;
}

std::string read_address(const EnvLookup& lookup, const char* launcher) {
  if (auto id = lookup("CCL_COMM_ID")) {
    check_host_port("CCL_COMM_ID", *id);
    return *id;
  }
  auto addr = lookup("MASTER_ADDR");
  auto port = lookup("MASTER_PORT");
  if (!addr && !port) {
    throw_error(cclInvalidUsage,
                "cclCommInitFromEnv: launcher %s gives the rank and size but no rendezvous "
                "address: set CCL_COMM_ID=host:port (or MASTER_ADDR and MASTER_PORT)",
                launcher);
  }
  if (!addr || !port) {
    throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s is set but %s is not",
                addr ? "MASTER_ADDR" : "MASTER_PORT", addr ? "MASTER_PORT" : "MASTER_ADDR");
  }
  int port_number = 0;
  if (!parse_strict_int(*port, &port_number) || port_number < 1 || port_number > 65535) {
    throw_error(cclInvalidUsage, "cclCommInitFromEnv: MASTER_PORT='%s' is not a port (1..65535)",
                port->c_str());
  }
  if (addr->empty()) throw_error(cclInvalidUsage, "cclCommInitFromEnv: MASTER_ADDR is empty");
  std::string host = *addr;
  // torchrun users write MASTER_ADDR=::1; host:port needs the brackets.
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  std::string text = host + ":" + *port;
  check_host_port("MASTER_ADDR", text);  // catches "[::1" and the like
  return text;
}

const LauncherVars* find_launcher(const EnvLookup& lookup) {
  const LauncherVars* found = nullptr;
  for (const auto& l : kLaunchers) {
    if (lookup(l.rank) || lookup(l.size)) {
      found = &l;
      break;
    }
  }
  // `srun torchrun ...` is common: every worker then also sees srun's SLURM_PROCID (one task per
  // node), which is not its rank. torchrun marks its workers with TORCHELASTIC_RUN_ID.
  if (found != nullptr && std::string(found->name) == "slurm" && lookup("TORCHELASTIC_RUN_ID") &&
      lookup("RANK")) {
    found = &kLaunchers[4];
  }
  return found;
}

}  // namespace

LauncherEnv read_launcher_env(const EnvLookup& lookup) {
  const LauncherVars* l = find_launcher(lookup);
  if (l == nullptr) {
    throw_error(cclInvalidUsage,
                "cclCommInitFromEnv: no launcher variables found: start the program with "
                "cclrun, mpirun, srun or torchrun, or set CCL_RANK and CCL_WORLD_SIZE");
  }
  LauncherEnv env;
  env.launcher = l->name;
  auto rank = lookup(l->rank);
  auto size = lookup(l->size);
  if (!rank || !size) {
    throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s is set but %s is not",
                rank ? l->rank : l->size, rank ? l->size : l->rank);
  }
  env.rank = read_int(l->rank, *rank);
  env.nranks = read_int(l->size, *size);
  if (env.nranks < 1) {
    throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s='%s' must be at least 1", l->size,
                size->c_str());
  }
  if (env.rank < 0 || env.rank >= env.nranks) {
    throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s='%s' is out of range [0, %d) (%s=%d)",
                l->rank, rank->c_str(), env.nranks, l->size, env.nranks);
  }
  if (auto local = lookup(l->local_rank)) {
    env.local_rank = read_int(l->local_rank, *local);
    if (env.local_rank < 0 || env.local_rank >= env.nranks) {
      throw_error(cclInvalidUsage, "cclCommInitFromEnv: %s='%s' is out of range [0, %d)",
                  l->local_rank, local->c_str(), env.nranks);
    }
  }

  env.address = read_address(lookup, l->name);
  const auto agent_store = lookup("TORCHELASTIC_USE_AGENT_STORE");
  if (std::string(l->name) == "torchrun" && !lookup("CCL_COMM_ID") && agent_store &&
      (*agent_store == "True" || *agent_store == "true" || *agent_store == "1")) {
    env.torch_store = true;
    env.torch_store_prefix = "ccl/" + lookup("TORCHELASTIC_RUN_ID").value_or("none") + "/" +
                             lookup("TORCHELASTIC_RESTART_COUNT").value_or("0");
  }

  if (auto hex = lookup("CCL_COMM_SECRET")) {
    // The value is not echoed: even a malformed secret should not end up in logs.
    if (!secret_from_hex(*hex, &env.secret)) {
      throw_error(cclInvalidUsage,
                  "cclCommInitFromEnv: CCL_COMM_SECRET is malformed (%zu characters): expected "
                  "32 hex digits",
                  hex->size());
    }
  }

  if (auto fd = lookup("CCL_BOOTSTRAP_LISTEN_FD")) {
    int value = read_int("CCL_BOOTSTRAP_LISTEN_FD", *fd);
    if (value < 0) {
      throw_error(cclInvalidUsage, "cclCommInitFromEnv: CCL_BOOTSTRAP_LISTEN_FD='%s' is negative",
                  fd->c_str());
    }
    if (env.rank == 0) {
      env.listen_fd = value;
    } else {
      // cclrun sets it for rank 0 only; elsewhere it was inherited by mistake, and using it
      // would mean listening where rank 0 does.
      CCL_WARN(kInit, "cclCommInitFromEnv: ignoring CCL_BOOTSTRAP_LISTEN_FD=%s on rank %d",
               fd->c_str(), env.rank);
    }
  }

  CCL_INFO(kInit, "cclCommInitFromEnv: launcher %s, rank %d of %d, local rank %d, rendezvous %s%s",
           env.launcher.c_str(), env.rank, env.nranks, env.local_rank, env.address.c_str(),
           env.listen_fd >= 0 ? " (listening socket inherited from cclrun)" : "");
  return env;
}

LauncherEnv read_launcher_env() {
  // CONFIG: launcher variables (most not CCL_*) are read through the injectable lookup by design;
  // the CCL_* ones among them are declared in config_table.cc for ccl-info --env.
  LauncherEnv env = read_launcher_env([](const char* name) -> std::optional<std::string> {
    const char* value = getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
  if (env.listen_fd >= 0) {
    // Only the real environment has real descriptors: make sure this one is the socket cclrun
    // bound for this job (a stale variable could name any open file) and keep it from leaking
    // into processes rank 0 itself starts.
    int fd = env.listen_fd;
    struct stat st {};
    int listening = 0;
    socklen_t len = sizeof(listening);
    sockaddr_storage local{};
    socklen_t local_len = sizeof(local);
    bool ok = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
              getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening &&
              getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0;
    int port = -1;
    if (ok && local.ss_family == AF_INET) {
      port = ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
    } else if (ok && local.ss_family == AF_INET6) {
      port = ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
    }
    size_t colon = env.address.rfind(':');
    int want = -1;
    parse_strict_int(env.address.substr(colon + 1), &want);
    if (port < 0 || port != want) {
      throw_error(cclInvalidUsage,
                  "cclCommInitFromEnv: CCL_BOOTSTRAP_LISTEN_FD=%d is not a socket listening on "
                  "port %d of %s (a stale variable inherited from another job?)",
                  fd, want, env.address.c_str());
    }
    fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
  }
  return env;
}

}  // namespace ccl
