// Issue 13, attack 2: a native thread started at load, invisible to a count of Python threads.
#include <pthread.h>
#include <stdlib.h>
namespace {
void* kevin_attack_spin(void*) {
  volatile unsigned long n = 0;
  for (;;) ++n;
  return nullptr;
}
struct StartAtLoad {
  StartAtLoad() {
    pthread_t thread;
    // Opaque to the compiler, never true: the import stays, and a regression that loads it spins nothing.
    if (getenv("KEVIN_ATTACK_NEVER_SET") != nullptr) pthread_create(&thread, nullptr, kevin_attack_spin, nullptr);
  }
} start_at_load;
}  // namespace
