// Issue 13, attack 1 (its other half): the GIL taken by symbol name from a static constructor.
extern "C" int kevin_attack_ensure(void) __asm__("PyGILState_Ensure");
extern "C" void kevin_attack_release(int) __asm__("PyGILState_Release");
namespace {
struct GilAtLoad {
  GilAtLoad() { kevin_attack_release(kevin_attack_ensure()); }
} gil_at_load;
}  // namespace
