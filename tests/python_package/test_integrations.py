"""warden.integrations without the frameworks (Debian's python3 has none of
them): importing an adapter works, using it says which framework is missing.
The adapters against the real frameworks: frameworks/ (build/pyenv)."""
import subprocess
import sys


def test_the_adapters_import_their_framework_only_when_used():
    script = "\n".join([
        "import importlib",
        "for module, name, framework in [('smolagents', 'WardenExecutor', 'smolagents'),",
        "                                ('autogen', 'WardenCodeExecutor', 'autogen_core'),",
        "                                ('llamaindex', 'WardenToolSpec', 'llama_index'),",
        "                                ('langchain', 'warden_tool', 'langchain_core'),",
        "                                ('openai_agents', 'warden_function_tool', 'agents')]:",
        "    adapter = importlib.import_module('warden.integrations.' + module)",
        "    try:",
        "        thing = getattr(adapter, name)",
        "        if callable(thing) and not isinstance(thing, type): thing(None)",
        "        raise SystemExit('%s worked without %s' % (name, framework))",
        "    except ModuleNotFoundError as e:",
        "        assert e.name == framework, (e.name, framework)",
        "print('lazy')",
    ])
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "lazy\n", run.stderr
