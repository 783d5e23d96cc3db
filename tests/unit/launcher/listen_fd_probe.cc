// Run under cclrun by cclrun_test: checks the listening socket cclrun hands to rank 0.
// Rank 0: CCL_BOOTSTRAP_LISTEN_FD is a listening TCP socket on CCL_COMM_ID's port; it accepts
// one connection from every other rank (which may have connected before rank 0 even looked: the
// socket was listening before any rank started). Other ranks: no such variable and no such
// socket among their descriptors; they connect once, with no retry. Exit status 0 when all
// holds, else a distinct code per check.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

namespace {

int env_int(const char* name) {
  const char* v = getenv(name);
  if (v == nullptr) {
    fprintf(stderr, "probe: %s missing\n", name);
    exit(2);
  }
  return atoi(v);
}

// The port of a listening socket, or -1.
int listening_port(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return -1;
  int on = 0;
  socklen_t len = sizeof(on);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) != 0 || !on) return -1;
  sockaddr_in addr{};
  len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.sin_family != AF_INET || addr.sin_addr.s_addr != htonl(INADDR_LOOPBACK)) return -1;
  return ntohs(addr.sin_port);
}

}  // namespace

int main() {
  int rank = env_int("CCL_RANK");
  int nranks = env_int("CCL_WORLD_SIZE");
  std::string id = getenv("CCL_COMM_ID") ? getenv("CCL_COMM_ID") : "";
  if (id.rfind("127.0.0.1:", 0) != 0) return 3;
  int port = atoi(id.c_str() + strlen("127.0.0.1:"));
  if (rank == 0) {
    int fd = env_int("CCL_BOOTSTRAP_LISTEN_FD");
    if (listening_port(fd) != port) return 10;
    usleep(200 * 1000);  // let the others connect first: the backlog holds them
    std::set<int> seen;
    for (int i = 1; i < nranks; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 10000) != 1) return 11;
      int c = accept(fd, nullptr, nullptr);
      if (c < 0) return 12;
      int peer = -1;
      if (read(c, &peer, sizeof(peer)) != sizeof(peer)) return 13;
      seen.insert(peer);
      close(c);
    }
    if (static_cast<int>(seen.size()) != nranks - 1 || *seen.begin() != 1) return 14;
    return 0;
  }
  if (getenv("CCL_BOOTSTRAP_LISTEN_FD") != nullptr) return 20;
  // The socket must not have leaked into this rank.
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 21;
  while (dirent* e = readdir(dir)) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd != dirfd(dir) && listening_port(fd) == port) return 22;
  }
  closedir(dir);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return 23;
  if (write(s, &rank, sizeof(rank)) != sizeof(rank)) return 24;
  // Wait for rank 0 to read it and close.
  char byte;
  if (read(s, &byte, 1) != 0) return 25;
  return 0;
}
