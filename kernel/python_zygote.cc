// warden-python-zygote: the Python fork server (see sandbox/fork_server.h).
//
// wardend runs it by the argv of an exec'd Python kernel (so that sandboxes'
// /proc/self/cmdline reads the same either way) and sends, as the setup
// message on fd 3, "KERNEL_FILE\nWARM_MODULES". An embedded CPython
// (Debian's libpython3, the interpreter behind /usr/bin/python3) loads the
// Python kernel from KERNEL_FILE under the name it has inside sandboxes,
// imports the comma-separated WARM_MODULES once,
// freezes the garbage collector's view of everything so far (children then
// never write to those objects' pages), and serves clone requests on fd 3.
// Each sandbox cloned from it runs the whole containment sequence and then,
// instead of execve, the kernel's main() right here: the interpreter and its
// imports are shared copy-on-write with every other sandbox.
//
// wardend starts it with the sandboxes' own environment and nothing of its
// own memory (fork+exec), so a sandbox can find nothing here that it could
// not read in its own root.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <signal.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "kernel/language.h"
#include "sandbox/fork_server.h"

namespace warden {
namespace {

// Runs in the zygote's __main__; sys.argv is ["", file, name inside, warm].
constexpr char kLoadKernel[] = R"py(
import gc, sys, types
_path, _inside, _warm = sys.argv[1], sys.argv[2], sys.argv[3]
_module = types.ModuleType("_warden_kernel")
_module.__file__ = _inside
with open(_path, "rb") as _f:
    _code = compile(_f.read(), _inside, "exec")
sys.modules["_warden_kernel"] = _module
exec(_code, _module.__dict__)
_warmed, _warm_errors = _module.warm_imports(_warm)
# The snapshot code too: every fork and wake needs it in a fresh clone
# (if it fails here, the kernel loads it on first use and says why).
try:
    _module.load_snapshots(_path[:_path.rindex("/") + 1] + "warden_snapshot.py",
                           _inside[:_inside.rindex("/") + 1] + "warden_snapshot.py")
except Exception:
    sys.modules.pop("_warden_snapshot", None)
sys.argv = [""]
_hello = "ok python %d.%d.%d" % sys.version_info[:3]
if _warmed:
    _hello += "; warm: " + ", ".join(_warmed)
if _warm_errors:
    _hello += "; failed to import: " + "; ".join("%s (%s)" % e for e in _warm_errors.items())
del _f, _code, _module
gc.collect()
gc.freeze()
)py";

// Runs in each sandbox's program, after the containment sequence.
constexpr char kRunKernel[] = R"py(
import os, sys
os.environ.clear()
for _entry in _warden_env:
    _key, _, _value = _entry.partition("=")
    os.environ[_key] = _value
del _warden_env, _entry, _key, _value
# Modules seeded in the zygote would hand every sandbox the same numbers.
if "numpy" in sys.modules:
    sys.modules["numpy"].random.seed()
import _warden_kernel
sys.exit(_warden_kernel.main())
)py";

void RunKernelInPlace(const ChildPlan& plan) {
  PyOS_AfterFork_Child();
  // What the interpreter's own start-up sets, undone by the containment
  // sequence's clean slate of signals.
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
  PyObject* env = PyList_New(0);
  for (char* const* e = plan.envp; e != nullptr && *e != nullptr; ++e) {
    PyObject* entry = PyUnicode_DecodeFSDefault(*e);
    PyList_Append(env, entry);
    Py_DECREF(entry);
  }
  PyObject* main_dict = PyModule_GetDict(PyImport_AddModule("__main__"));
  PyDict_SetItemString(main_dict, "_warden_env", env);
  Py_DECREF(env);
  // SystemExit ends the process through Py_Exit, as `python3 file` would.
  PyRun_SimpleString(kRunKernel);
  _exit(1);
}

std::string Start(const std::string& kernel_file, const std::string& warm) {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.use_environment = 0;    // -E, as the exec'd kernel runs
  config.buffered_stdio = 0;     // -u
  config.user_site_directory = 0;
  config.parse_argv = 0;
  config.install_signal_handlers = 1;
  PyConfig_SetString(&config, &config.program_name, L"/usr/bin/python3");
  PyConfig_SetString(&config, &config.executable, L"/usr/bin/python3");
  const std::string inside = absl::StrCat(kKernelMountPoint, "/warden_kernel.py");
  char* args[] = {const_cast<char*>(""), const_cast<char*>(kernel_file.c_str()),
                  const_cast<char*>(inside.c_str()), const_cast<char*>(warm.c_str())};
  PyStatus status = PyConfig_SetBytesArgv(&config, 4, args);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    return absl::StrCat("error initialising Python: ", status.err_msg ? status.err_msg : "unknown");
  }
  PyObject* main_dict = PyModule_GetDict(PyImport_AddModule("__main__"));
  PyObject* done = PyRun_String(kLoadKernel, Py_file_input, main_dict, main_dict);
  if (done == nullptr) {
    PyErr_Print();
    return absl::StrCat("error loading the kernel ", kernel_file, " (its traceback is on stderr)");
  }
  Py_DECREF(done);
  const int threads = CountThreads();
  if (threads != 1) {
    return absl::StrCat("error the interpreter runs ", threads,
                        " threads after its warm imports; a fork server must have one "
                        "(set OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1)");
  }
  PyObject* hello = PyDict_GetItemString(main_dict, "_hello");
  const char* text = hello != nullptr ? PyUnicode_AsUTF8(hello) : nullptr;
  return text != nullptr ? text : "ok python";
}

}  // namespace
}  // namespace warden

// Sanitizer builds only (docs/security.md "Sanitizers"). The zygote starts
// with the sandboxes' environment, so no *SAN_OPTIONS reach it: it compiles
// its own in. A finding ends the process, as everywhere in those builds, and
// its report goes to stderr: the zygote's, or the sandbox's in a clone.
// Leaks are not checked here: a clone ends inside its sandbox through
// Py_Exit, where LeakSanitizer would stop the world with ptrace, which the
// seccomp policy denies (the run would be reported as a violation), and the
// embedded interpreter keeps its objects to the end by design. wardend and
// the tests, which share this code, are checked.
#if defined(__SANITIZE_ADDRESS__)
// Its clones run under the sandbox's memory limit, which the runtime's own
// memory counts towards: freed blocks are held in quarantine (to catch use
// after free) up to 256 MiB by default, enough to push a clone importing the
// runtime's libraries past the default 512 MiB; 16 MiB still catches a use
// soon after the free.
extern "C" const char* __asan_default_options() {
  return "halt_on_error=1:detect_leaks=0:quarantine_size_mb=16";
}
#endif
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_options() { return "halt_on_error=1"; }
#endif

int main() {
  const std::string setup = warden::ReceiveForkServerSetup();
  const size_t newline = setup.find('\n');
  if (newline == std::string::npos) {
    fprintf(stderr, "warden-python-zygote: started by wardend only (no setup message on fd 3)\n");
    return 2;
  }
  const std::string hello = warden::Start(setup.substr(0, newline), setup.substr(newline + 1));
  warden::ForkServerHooks hooks;
  hooks.before_clone = PyOS_BeforeFork;
  hooks.after_clone = PyOS_AfterFork_Parent;
  hooks.run_in_place = warden::RunKernelInPlace;
  warden::ServeForkRequests(hello, hooks);
}
