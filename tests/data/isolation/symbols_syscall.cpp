// Issue 13, attack 4 used syscall(SYS_clone, CLONE_PARENT | SIGCHLD, ...). The import is the same
// whatever the number; this one asks for getpid, so nothing happens if a regression loads it.
#include <sys/syscall.h>
#include <unistd.h>
namespace {
struct CallAtLoad {
  CallAtLoad() { (void)syscall(SYS_getpid); }
} call_at_load;
}  // namespace
