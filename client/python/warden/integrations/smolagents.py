"""A smolagents executor backed by one Warden session.

    from smolagents import CodeAgent
    from warden.integrations.smolagents import WardenExecutor
    agent = CodeAgent(tools=[], model=model, executor=WardenExecutor())

WardenExecutor subclasses smolagents' RemotePythonExecutor and implements
run_code_raise_errors(code) -> CodeOutput the way smolagents' own
E2BExecutor does (smolagents/remote_executors.py); send_tools and
send_variables come from the base class, so tools and variables reach the
session as they reach E2B. The final answer arrives as the
FinalAnswerException that the base class makes final_answer() raise. A plot
(a PNG or JPEG result, or a figure shown with plt.show()) comes back as a
PIL image. Tested against smolagents itself (tests/python_package/frameworks).
"""
from __future__ import annotations

from io import BytesIO
from typing import Any, Optional

from warden.integrations._lazy import lazy_attribute


def _build() -> Any:
    from smolagents.local_python_executor import CodeOutput
    from smolagents.monitoring import AgentLogger, LogLevel
    from smolagents.remote_executors import RemotePythonExecutor
    from smolagents.utils import AgentError

    import warden
    from warden.integrations._text import execution_text

    class WardenExecutor(RemotePythonExecutor):  # type: ignore[misc, valid-type]
        """Runs a CodeAgent's code in one Warden session, closed by cleanup().

        client: a warden.Client (default: a new one from WARDEN_ADDR and
        WARDEN_TOKEN); timeout: each cell's wall-clock limit in seconds;
        logger: smolagents' AgentLogger (default: one at level INFO).
        session_options go to Client.session (memory_mb, ttl, ...).
        """

        def __init__(self, additional_imports: Optional[list] = None, logger: Any = None,
                     client: Optional[warden.Client] = None, timeout: Optional[float] = None,
                     allow_pickle: bool = False, **session_options: Any) -> None:
            super().__init__(additional_imports or [], logger or AgentLogger(level=LogLevel.INFO), allow_pickle)
            self.client = client or warden.Client()
            self.timeout = timeout
            self.session = self.client.session("python", labels={"client": "smolagents"}, **session_options)
            try:
                self.installed_packages = self.install_packages(self.additional_imports)
            except BaseException:
                self.cleanup()  # do not leave the session behind
                raise

        def run_code_raise_errors(self, code: str) -> Any:
            execution = self.session.run(code, timeout=self.timeout)
            logs = execution.stdout
            if execution.error is not None and execution.error.name == self.FINAL_ANSWER_EXCEPTION:
                answer = self._deserialize_final_answer(execution.error.value, self.allow_pickle)
                return CodeOutput(output=answer, logs=logs, is_final_answer=True)
            if not execution.ok:
                raise AgentError("%s\nExecuting code yielded an error:\n%s" % (logs, execution_text(execution)),
                                 self.logger)
            main = execution.result
            # The value of the last expression first, else a figure the code showed.
            for result in ([main] if main is not None else []) + [r for r in execution.results if r is not main]:
                image = result.png if result.png is not None else result.jpeg
                if image is not None:
                    import PIL.Image
                    return CodeOutput(output=PIL.Image.open(BytesIO(image)), logs=logs, is_final_answer=False)
            return CodeOutput(output=main.text if main is not None else None, logs=logs, is_final_answer=False)

        def install_packages(self, additional_imports: list) -> list:
            # As smolagents does it, with pip in the session: Warden's pip
            # answers "Requirement already satisfied" at once for what the
            # runtime has, installs the rest from the pool's wheelhouse, and
            # fails at once, naming the wheelhouse, for anything else.
            if additional_imports:
                self.run_code_raise_errors(
                    "%pip install " + " ".join(additional_imports) + "\n"
                    "if _exit_code:\n"
                    "    raise RuntimeError('pip install failed (exit %d): see the log above' % _exit_code)")
            return additional_imports

        def cleanup(self) -> None:
            try:
                self.session.close()
            except warden.NotFound:  # already expired or closed
                pass

    return WardenExecutor


__getattr__ = lazy_attribute("WardenExecutor", _build)
