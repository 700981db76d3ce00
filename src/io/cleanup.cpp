#include "io/cleanup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dsa::io {

namespace {

constexpr int kSlots = 256;
constexpr std::size_t kMaxPath = 4096;

struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 registered file, 3 registered directory
  char path[kMaxPath];
};
Slot g_slots[kSlots];

std::atomic<int> g_defer{0};    // DeferSignals nesting (all threads)
std::atomic<int> g_pending{0};  // a signal that arrived while deferred

void remove_dir_contents(const char* dir) {
  const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      struct Ent {
        unsigned long long ino;
        long long off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const Ent* e = reinterpret_cast<const Ent*>(buf + off);
      if (!(e->name[0] == '.' && (e->name[1] == 0 || (e->name[1] == '.' && e->name[2] == 0))))
        ::unlinkat(fd, e->name, 0);
      off += e->reclen;
    }
  }
  ::close(fd);
}

void cleanup_all() {
  for (auto& s : g_slots)  // files first (a temp file may sit in a staging directory), then directories
    if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
  for (auto& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == 3) {
      remove_dir_contents(s.path);
      ::rmdir(s.path);
    }
}

void die_of(int sig) {
  cleanup_all();
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);  // not reached
}

void on_signal(int sig) {
  if (g_defer.load() > 0) {
    int expected = 0;
    g_pending.compare_exchange_strong(expected, sig);
    return;
  }
  die_of(sig);
}

}  // namespace

void install_signal_cleanup() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;  // a deferred signal returns: interrupted system calls resume
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaddset(&sa.sa_mask, SIGHUP);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old;
    // A signal ignored at start (nohup, a background job of a non-interactive shell) stays ignored.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

int register_temp(const std::string& path, bool is_dir) {
  if (path.empty() || path.size() >= kMaxPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(is_dir ? 3 : 2, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0 && slot < kSlots) g_slots[slot].state.store(0, std::memory_order_release);
}

DeferSignals::DeferSignals() { ++g_defer; }
DeferSignals::~DeferSignals() {
  if (--g_defer == 0)
    if (const int sig = g_pending.exchange(0); sig != 0) die_of(sig);
}

void test_hold_before_rename(const std::string& tmp) {
  const char* v = std::getenv("DSA_CHECK_TEST_HOLD_BEFORE_RENAME");
  if (!v || std::strcmp(v, "1") != 0) return;
  std::fprintf(stderr, "dsa-check: test hold before rename: %s\n", tmp.c_str());
  std::fflush(stderr);
  for (int i = 0; i < 600; ++i) ::usleep(100000);
}

}  // namespace dsa::io
