// Issue 13, attack 1: the Python C API reached by symbol name, with no `Py` identifier outside a
// string literal. A static constructor runs Python at load, before any check.
extern "C" int kevin_attack_run(const char*) __asm__("PyRun_SimpleString");
namespace {
struct RunAtLoad {
  RunAtLoad() { kevin_attack_run("import os"); }
} run_at_load;
}  // namespace
