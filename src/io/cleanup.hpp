// In-flight output files removed when the process is interrupted (SIGINT, SIGTERM, SIGHUP).
//
// Every writer (io::write_text_atomic, io::write_file, golden's staging directory) registers its temp path here
// before creating it and unregisters it once it has been renamed into place or removed. The signal handler, installed
// once by main(), is async-signal-safe: it walks a fixed table of paths copied in beforehand (no allocation, no
// locks), unlinks each registered temp file, empties and removes each registered staging directory (one level, via
// getdents64), then restores the default action and re-raises the signal, so the exit status shows the signal.
//
// Test hook: with DSA_CHECK_TEST_HOLD_BEFORE_RENAME=1 in the environment, every writer prints
// "dsa-check: test hold before rename: TEMP" on stderr just before its rename and then waits (up to 60 s) -- the
// tests send their signal at that point, deterministically, with the temp file complete on disk.
#pragma once
#include <string>

namespace dsa::io {

// Installs the SIGINT / SIGTERM / SIGHUP handlers (idempotent).
void install_signal_cleanup();

// Registers a temp file (or, with is_dir, a flat staging directory) to remove on a signal; returns its slot, or -1
// when the path is too long or the table is full (then it is not removed on a signal: never an error).
int register_temp(const std::string& path, bool is_dir = false);
void unregister_temp(int slot);

// RAII registration.
class TempGuard {
 public:
  explicit TempGuard(const std::string& path, bool is_dir = false) : slot_(register_temp(path, is_dir)) {}
  ~TempGuard() { unregister_temp(slot_); }
  TempGuard(const TempGuard&) = delete;
  TempGuard& operator=(const TempGuard&) = delete;

 private:
  int slot_;
};

// While one exists (any thread), SIGINT/SIGTERM/SIGHUP are deferred: the handler records the signal and returns; the
// last guard to go acts on it (cleanup, default action). Used around a short sequence of renames that must not be
// cut in half (golden's commit of its staging directory).
class DeferSignals {
 public:
  DeferSignals();
  ~DeferSignals();
  DeferSignals(const DeferSignals&) = delete;
  DeferSignals& operator=(const DeferSignals&) = delete;
};

// The test hook above (a no-op unless DSA_CHECK_TEST_HOLD_BEFORE_RENAME=1).
void test_hold_before_rename(const std::string& tmp);

}  // namespace dsa::io
