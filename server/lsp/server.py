"""The pygls language server object. Handlers stay thin: each translates one
LSP method into calls on the core (docs/architecture.md, "Style to follow").

`create_server` (lsp/handlers.py) makes it with every area's handlers.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO, cast

from pygls.exceptions import FeatureNotificationError, JsonRpcException
from pygls.io_ import StdoutWriter, run_async
from pygls.lsp.server import LanguageServer

from agentls import __version__
from agentls.lsp.state import ServerState
from agentls.lsp.wire.protocol import AgentlsProtocol, BoundedReader
from agentls.lsp.wire.stdio import PipeReader, can_read_as_pipe

log = logging.getLogger("agentls.lsp")

# Modules under agentls.lsp with a `register(server)` function.
class AgentlsLanguageServer(LanguageServer):
    def __init__(self, state: ServerState | None = None) -> None:
        super().__init__("agentls", __version__, protocol_cls=AgentlsProtocol)
        self.state = state or ServerState()
        # Coroutines run at shutdown (finish turns, close providers, flush sessions).
        self.shutdown_steps: list[Any] = []
        # Set once `initialized` has pulled workspace/configuration, so a
        # request sent right after start-up does not run on default settings.
        self.settings_ready = asyncio.Event()
        self.last_status: dict[str, Any] | None = None  # last didChangeStatus sent
        # Fire-and-forget tasks (e.g. the workspace-trust question), kept
        # referenced until they end.
        self.background_tasks: set[asyncio.Future[Any]] = set()
        # inline_registration: whether the client registers inlineCompletion
        # dynamically, and whether it is registered now.
        self.features_started = asyncio.Event()  # set after the first start_features
        self.inline_dynamic = False
        self.inline_registered = False
        # The Copilot language server's dialect (lsp/copilot/dialect.py):
        # forced by `agentls --copilot`, else decided at initialize.
        self.copilot_forced = False
        self.copilot_dialect = False
        self.copilot_plugin: str | None = None  # "copilot.lua 1.515.0"
        self.copilot_status: tuple[str, str] | None = None  # last statusNotification

    def in_background(self, work: Any) -> asyncio.Future[Any]:
        """Run the coroutine `work` as a fire-and-forget task, kept
        referenced until it ends."""
        task: asyncio.Future[Any] = asyncio.ensure_future(work)
        self.background_tasks.add(task)
        task.add_done_callback(self.background_tasks.discard)
        return task

    async def wait_settings(self, limit: float = 5.0) -> None:
        """Wait (bounded) until the client's settings have been read."""
        if self.settings_ready.is_set():
            return
        try:
            await asyncio.wait_for(self.settings_ready.wait(), limit)
        except TimeoutError:
            log.warning("Settings not read after %ss; going on with what is known", limit)
            self.settings_ready.set()

    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        stdin = stdin or sys.stdin.buffer
        stdout = stdout or sys.stdout.buffer
        if not can_read_as_pipe(stdin, stdout):
            # Bounded reads: a Content-Length header alone must not be able to
            # make the process allocate (and die on) an arbitrary amount.
            super().start_io(cast(BinaryIO, BoundedReader(stdin)), stdout)
            return
        # pygls' own _start_io_async with stdin read by the event loop (stdio.py).
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout))
        try:
            asyncio.run(self._serve_pipe(stdin))
        except BrokenPipeError:
            log.error("Connection to the client is lost! Shutting down the server.")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]

    def start_socket(self, path: Path, *, chosen: bool = False) -> None:
        """Serve on a Unix socket only this user can reach (transport.py),
        one client at a time, until `exit`."""
        from agentls.lsp.wire import transport

        path = transport.prepare_socket_path(path, chosen=chosen)
        service = transport.SocketService(self, token=None, unix=True)

        async def start(svc: transport.SocketService) -> asyncio.Server:
            listener = await transport.listen_unix(svc, path)
            transport.announce(f"listening on Unix socket {path}")
            return listener

        def cleanup() -> None:
            try:
                path.unlink()
            except OSError:
                pass

        self._prepare_for_clients()
        transport.run_service(self, start, service, cleanup)

    def start_tcp(self, host: str, port: int, token: str | None = None,
                  token_file: Path | None = None) -> None:
        """Serve on TCP; a client must present the token first (transport.py).
        Without `token`, a random one is written to `token_file` (default: the
        user's runtime folder), mode 0600."""
        from agentls.core.support.loopback import is_loopback
        from agentls.lsp.wire import transport

        written: list[Path] = []
        service = transport.SocketService(self, token=token, unix=False)

        async def start(svc: transport.SocketService) -> asyncio.Server:
            listener = await transport.listen_tcp(svc, host, port)
            bound = listener.sockets[0].getsockname()[1]
            if svc.token is None:
                made = (transport.new_token_file(token_file, chosen=True) if token_file
                        else transport.new_token_file(transport.default_token_path(bound)))
                svc.token = made.value
                if made.file is not None:
                    written.append(made.file)
                where = f"the token is in {made.file} (mode 0600)"
            else:
                where = f"the token is the one in ${transport.TOKEN_ENV}"
            transport.announce(f"listening on {host}:{bound}; a client sends the token in "
                               f"initializationOptions.{transport.TOKEN_OPTION}; {where}")
            if not is_loopback(host):
                transport.announce(f"warning: {host} is reachable from other machines and "
                                   "the connection is not encrypted; prefer --socket, or "
                                   "127.0.0.1 with an SSH tunnel")
            return listener

        def cleanup() -> None:
            for file in written:
                try:
                    file.unlink()
                except OSError:
                    pass

        self._prepare_for_clients()
        transport.run_service(self, start, service, cleanup)

    def _prepare_for_clients(self) -> None:
        from agentls.lsp.wire.transport import NoClientWriter

        self.protocol.set_writer(NoClientWriter())
        cast(AgentlsProtocol, self.protocol).connected = False

    async def serve_connection(self, reader: Any) -> None:
        """pygls' message loop over one client connection (transport.py)."""
        assert self._stop_event is not None
        protocol = cast(AgentlsProtocol, self.protocol)
        protocol.connected = True
        try:
            await run_async(stop_event=self._stop_event, reader=reader, protocol=self.protocol,
                            logger=log, error_handler=self.report_server_error)
        finally:
            protocol.connected = False

    async def _serve_pipe(self, stdin: Any) -> None:
        assert self._stop_event is not None
        reader = await PipeReader.open(stdin)
        await run_async(stop_event=self._stop_event, reader=reader, protocol=self.protocol,
                        logger=log, error_handler=self.report_server_error)

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls' reader loop reports a body it could not parse here (source is
        # JsonRpcException) and answers nothing: the client is owed -32700.
        # Other errors keep pygls' behaviour (shown to the user), notification
        # failures once per kind.
        if source is JsonRpcException and isinstance(error, ValueError | RecursionError):
            cast(AgentlsProtocol, self.protocol).answer_parse_error(error)
            return
        if source is FeatureNotificationError:
            # pygls has logged it with its traceback. A client out of step (a
            # didChange for a document it never opened) would otherwise get an
            # "Error in server" popup on every keystroke: once per kind is enough.
            if not self.state.first_time(f"notification-error:{type(error).__name__}"):
                return
        super().report_server_error(error, source)

    async def graceful_shutdown(self) -> None:
        """Finish what must not be lost, then release resources. Each step is
        bounded so a stuck step cannot keep the editor waiting."""
        for step in self.shutdown_steps:
            try:
                await asyncio.wait_for(step(), 10)
            except Exception:
                log.exception("Shutdown step %r failed", step)
        await self.state.host.close_provider()
        self.state.host.stores.close()
