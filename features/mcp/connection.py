"""One MCP server: its client session (the official `mcp` SDK, imported
here only), its lists of tools, prompts and resources, and its state.

The session lives in one background task (`_run`), because the SDK's
client is an async context manager whose transport must be entered and
left by the same task. Other tasks call through it: tools/call, prompts/get
and resources/read are requests on the shared session.

States: "starting" -> "ready"; "failed" (never started, crashed, or its
process exited; `error` holds the reason and the tail of its stderr);
"stopped" (shut down on purpose). A failed server is started again by the
next call that needs it, after a backoff that doubles per failure (1 s up
to 60 s), so a server that dies at once is not respawned in a loop.

Stdio servers run in their own process group (the SDK's `start_new_session`)
and are stopped the way the spec says (close stdin, wait, SIGTERM the group,
SIGKILL); their stderr goes to a pipe read by a thread that keeps only the
last few kilobytes, so a server flooding stderr costs no memory or disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any, Literal

from agentls.core.support.log_redaction import register_secret
from agentls.features.mcp.config import McpServerSpec, child_environment, resolved_headers
from agentls.features.mcp.stderr import StderrTail
from agentls.features.mcp.wire import (
    describe,
    first_of,
    import_sdk,
    is_connection_lost,
    is_timeout,
    paged,
    render_prompt,
    wire,
)

__all__ = ["McpCallError", "McpConnection"]

log = logging.getLogger("agentls.mcp")

State = Literal["starting", "ready", "failed", "stopped"]
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
LOG_MESSAGES_MAX = 200  # server log notifications logged per start; later ones at debug


class McpCallError(Exception):
    """A call that could not be made or did not finish (not the server's
    own isError result, which is an answer)."""


class McpConnection:
    def __init__(self, spec: McpServerSpec, *, environ: Mapping[str, str],
                 hidden_env: frozenset[str], on_change: Callable[[], None] | None = None,
                 client_name: str = "agentls", client_version: str = "0") -> None:
        self.spec = spec
        self.environ = environ
        self.hidden_env = hidden_env
        self.on_change = on_change or (lambda: None)
        self.client_info = (client_name, client_version)
        self.state: State = "stopped"
        self.error: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.prompts: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []
        self.prompt_texts: dict[str, str] = {}
        self.server_name: str | None = None
        self.dropped_tools: list[str] = []  # malformed tools the server listed
        self.failures = 0
        self.retry_at = 0.0
        self.version = 0  # bumped whenever the lists change
        self.stderr: StderrTail | None = None
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._died = asyncio.Event()
        self._log_messages = 0
        self._refreshing: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> None:
        """Start in the background (no-op while starting or ready; a
        previous run still shutting down is awaited first by `restart`)."""
        if self._task is not None and not self._task.done():
            return
        self.state = "starting"
        self.error = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._died = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop the server (its whole process group) and wait for it, bounded."""
        task = self._task
        self._stop.set()
        if task is None:
            self.state = "stopped"
            return
        if self.state == "starting" and not task.done():
            # Not listening for `stop` yet: cancel; the SDK's transport still
            # stops the process (its shutdown is shielded and bounded).
            task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), 8)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 4)
        self.state = "stopped"
        self._task = None

    async def wait_ready(self, within: float | None = None) -> bool:
        """Whether the server became ready (False when it failed or timed out)."""
        task = self._task
        if task is None:
            return False
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait({ready, task}, timeout=within,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        return self.state == "ready"

    async def ensure_ready(self) -> Any:
        """The live client, starting or restarting the server when needed
        (with backoff after failures). McpCallError when it cannot be had."""
        if self.state == "ready" and self._client is not None:
            return self._client
        if self.state in ("failed", "stopped"):
            wait = self.retry_at - time.monotonic()
            if self.state == "failed" and wait > 0:
                raise McpCallError(
                    f"MCP server {self.name!r} is not running ({self.error}); agentls tries "
                    f"to start it again in {wait:.0f}s.")
            old = self._task
            if old is not None and not old.done():
                # The failed run is still stopping its process: let it finish.
                await asyncio.wait({old}, timeout=10)
            self.start()
        timeout = self.spec.config.startup_timeout_seconds
        if not await self.wait_ready(timeout + 5):
            raise McpCallError(f"MCP server {self.name!r} is not available: "
                               f"{self.error or 'it did not start in time'}")
        return self._client

    def _failed(self, reason: str) -> None:
        tail = self.stderr.text() if self.stderr is not None else ""
        self.error = reason + (f"\nstderr:\n{tail}" if tail else "")
        self.state = "failed"
        self.failures += 1
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (self.failures - 1))
        self.retry_at = time.monotonic() + delay
        log.warning("MCP server %s failed: %s", self.name, self.error)
        self.on_change()

    async def _run(self) -> None:
        import anyio

        config = self.spec.config
        stderr: StderrTail | None = None
        # This run's own events: a later run replaces the attributes.
        ready, stop, died = self._ready, self._stop, self._died
        try:
            # The SDK's first import takes a while (0.8-2 s of CPU): off the
            # event loop (features start after the first inline completion,
            # lsp/lifecycle.py, so the editor's first suggestion is not slowed).
            await asyncio.to_thread(import_sdk)
            with anyio.CancelScope() as scope:
                # The start-up deadline, lifted once the server answered its lists.
                scope.deadline = anyio.current_time() + config.startup_timeout_seconds
                async with AsyncExitStack() as stack:
                    client_obj, stderr = await self._client_for(stack)
                    self.stderr = stderr
                    client = await stack.enter_async_context(client_obj)
                    if stderr is not None:
                        stderr.close_writer()
                        stderr.on_close(lambda: self._process_exited(died))
                    self._client = client
                    info = getattr(client, "server_info", None)
                    self.server_name = getattr(info, "name", None)
                    await self._load_lists(client)
                    scope.deadline = float("inf")
                    self.state = "ready"
                    self.failures = 0
                    self.version += 1
                    ready.set()
                    log.info("MCP server %s ready: %d tools, %d prompts, %d resources",
                             self.name, len(self.tools), len(self.prompts), len(self.resources))
                    self.on_change()
                    await first_of(stop.wait(), died.wait())
                    if died.is_set() and not stop.is_set():
                        self._client = None
                        self._failed("The server process exited.")
            if scope.cancelled_caught and self.state == "starting":
                await self._settle_stderr()
                self._failed(f"The server did not answer within "
                             f"{config.startup_timeout_seconds:g}s "
                             "(startupTimeoutSeconds).")
        except asyncio.CancelledError:
            self.state = "stopped"
            raise
        except Exception as exc:
            await self._settle_stderr()
            self._failed(describe(exc, self.spec))
        finally:
            self._client = None
            if self.state in ("starting", "ready"):
                self.state = "stopped"
            if stderr is not None:
                stderr.close_writer()
            ready.set()  # wake waiters; they read the state

    def _process_exited(self, died: asyncio.Event) -> None:
        """Called from the stderr thread at EOF: the server process is gone
        (or closed stderr, which servers do not do while alive)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(died.set)

    @property
    def _loop(self) -> asyncio.AbstractEventLoop | None:
        task = self._task
        return task.get_loop() if task is not None else None

    async def _client_for(self, stack: AsyncExitStack) -> tuple[Any, StderrTail | None]:
        from mcp import Client
        from mcp_types import Implementation

        config = self.spec.config
        name, version = self.client_info
        common: dict[str, Any] = {
            "client_info": Implementation(name=name, version=version),
            "logging_callback": self._on_log,
            "message_handler": self._on_message,
            "read_timeout_seconds": config.timeout_seconds,
            "cache": None,
        }
        if config.command is not None:
            from mcp.client.stdio import StdioServerParameters

            env, missing = child_environment(config, self.environ, self.hidden_env)
            register_secret(*(env[key] for key in config.env if key in env))
            if missing:
                log.warning("MCP server %s: environment variables %s are not set", self.name,
                            ", ".join(sorted(set(missing))))
            params = StdioServerParameters(command=config.command, args=list(config.args),
                                           env=env, cwd=config.cwd,
                                           encoding_error_handler="replace")
            tail = StderrTail()
            errlog = tail.writer()
            stack.callback(errlog.close)
            from mcp.client.stdio import stdio_client

            return Client(stdio_client(params, errlog=errlog), **common), tail
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers, missing = resolved_headers(config, self.environ)
        register_secret(*headers.values())
        if missing:
            log.warning("MCP server %s: environment variables %s are not set", self.name,
                        ", ".join(sorted(set(missing))))
        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)))
        return Client(streamable_http_client(str(config.url), http_client=http), **common), None

    # -- lists ---------------------------------------------------------------
    async def _load_lists(self, client: Any) -> None:
        caps = client.server_capabilities
        tools: list[dict[str, Any]] = []
        prompts: list[dict[str, Any]] = []
        resources: list[dict[str, Any]] = []
        if getattr(caps, "tools", None) is not None:
            tools = await self._list_tools(client)
        if getattr(caps, "prompts", None) is not None:
            try:
                prompts = await paged(client.list_prompts, "prompts")
            except Exception as exc:
                log.warning("MCP server %s: prompts/list failed: %s", self.name, exc)
        if getattr(caps, "resources", None) is not None:
            try:
                resources = await paged(client.list_resources, "resources")
            except Exception as exc:
                log.warning("MCP server %s: resources/list failed: %s", self.name, exc)
        texts: dict[str, str] = {}
        for prompt in prompts[:50]:
            texts[prompt["name"]] = await self._prompt_template(client, prompt)
        self.tools, self.prompts, self.resources = tools, prompts, resources
        self.prompt_texts = texts

    async def _list_tools(self, client: Any) -> list[dict[str, Any]]:
        """tools/list. The SDK refuses a whole listing when one tool in it
        is malformed (a schema that is not an object, a name that is not a
        string); then the listing is read raw and only the tools the SDK
        accepts are kept, the others reported, so one bad tool does not
        take the server's other tools with it."""
        from pydantic import ValidationError

        try:
            return await paged(client.list_tools, "tools")
        except ValidationError as exc:
            log.warning("MCP server %s: tools/list has malformed tools (%s); reading it raw",
                        self.name, str(exc).splitlines()[0])
        from mcp_types import ListToolsResult, Tool

        session = client.session
        data: dict[str, Any] = {"method": "tools/list", "params": None}
        opts: dict[str, Any] = {"timeout": self.spec.config.timeout_seconds}
        # The SDK's own request path, minus its result validation (private
        # API, pinned by the mcp>=2.3,<3 requirement).
        session._stamp(data, opts)
        raw = await session._dispatcher.send_raw_request("tools/list", data.get("params"), opts)
        kept: list[Any] = []
        self.dropped_tools = []
        for item in raw.get("tools") or [] if isinstance(raw, dict) else []:
            try:
                kept.append(Tool.model_validate(item, by_name=False))
            except ValidationError as error:
                name = item.get("name") if isinstance(item, dict) else None
                reason = str(error).splitlines()[1:3]
                self.dropped_tools.append(f"{name!r}: {' '.join(r.strip() for r in reason)}")
        if self.dropped_tools:
            log.warning("MCP server %s: tools left out because the MCP SDK rejects them: %s",
                        self.name, "; ".join(self.dropped_tools))
        listing = ListToolsResult(tools=kept)
        with contextlib.suppress(Exception):
            session._absorb_tool_listing(listing, complete=True)
        return [wire(tool) for tool in kept]

    async def _prompt_template(self, client: Any, prompt: dict[str, Any]) -> str:
        """The prompt's text with each argument as a `{{name}}` placeholder
        the user fills in (asked once, when the lists load)."""
        names = [a.get("name") for a in prompt.get("arguments") or [] if a.get("name")]
        try:
            result = await asyncio.wait_for(
                client.get_prompt(prompt["name"], {n: "{{" + n + "}}" for n in names}), 10)
            return render_prompt(wire(result))
        except Exception as exc:
            log.info("MCP server %s: prompts/get %s with placeholders failed (%s)", self.name,
                     prompt.get("name"), exc)
            args = " ".join("{{" + n + "}}" for n in names)
            return f"/{prompt['name']} {args}".strip()

    async def refresh_lists(self) -> None:
        client = self._client
        if client is None:
            return
        try:
            await asyncio.wait_for(self._load_lists(client), self.spec.config.timeout_seconds)
        except Exception as exc:
            log.warning("MCP server %s: refreshing its lists failed: %s", self.name, exc)
            return
        self.version += 1
        self.on_change()

    async def _on_message(self, message: Any) -> None:
        kind = type(message).__name__
        inner = getattr(message, "root", message)
        method = getattr(inner, "method", "") or ""
        if "list_changed" in method or "ListChanged" in kind or "ListChanged" in type(
                inner).__name__:
            if self._refreshing is None or self._refreshing.done():
                self._refreshing = asyncio.ensure_future(self.refresh_lists())
        elif isinstance(message, Exception):
            # e.g. a line on stdout that is not JSON-RPC: reported, never fatal
            log.warning("MCP server %s sent something that is not MCP: %s", self.name,
                        str(message)[:300])

    async def _on_log(self, params: Any) -> None:
        self._log_messages += 1
        level = getattr(params, "level", "info")
        data = getattr(params, "data", "")
        text = str(data)[:2000]
        if self._log_messages > LOG_MESSAGES_MAX:
            log.debug("MCP server %s [%s]: %s", self.name, level, text)
            return
        log.info("MCP server %s [%s]: %s", self.name, level, text)

    # -- requests ------------------------------------------------------------
    async def call_tool(self, name: str, arguments: dict[str, Any],
                        progress: Callable[[str], Awaitable[None]] | None = None
                        ) -> dict[str, Any]:
        """The `tools/call` result in wire form. McpCallError when the call
        could not be completed (server down, crashed mid-call, timed out).
        The server's progress notifications go to `progress` as text."""
        client = await self.ensure_ready()
        timeout = self.spec.config.timeout_seconds

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            if progress is None:
                return
            amount = f"{done:g}/{total:g}" if total else f"{done:g}"
            with contextlib.suppress(Exception):
                await progress(f"{self.name}/{name}: {amount}" + (f" {message}" if message
                                                                     else ""))

        try:
            result = await asyncio.wait_for(
                client.call_tool(name, arguments, read_timeout_seconds=timeout,
                                 progress_callback=on_progress), timeout + 5)
        except asyncio.CancelledError:
            raise
        except TimeoutError as exc:
            raise McpCallError(f"MCP server {self.name!r} did not answer {name} within "
                               f"{timeout:g}s (timeoutSeconds); the call was cancelled.") from exc
        except Exception as exc:
            await self._settle_stderr()
            raise self._call_failed(name, exc) from exc
        return wire(result)

    async def _settle_stderr(self) -> None:
        """After a broken call, give a dying server's last stderr lines a
        moment to arrive: they usually say why."""
        tail = self.stderr
        if tail is not None and not tail.closed.is_set():
            await asyncio.to_thread(tail.closed.wait, 0.5)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        client = await self.ensure_ready()
        try:
            result = await asyncio.wait_for(client.get_prompt(name, arguments),
                                            self.spec.config.timeout_seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise self._call_failed(name, exc) from exc
        return render_prompt(wire(result))

    async def read_resource(self, uri: str) -> dict[str, Any]:
        client = await self.ensure_ready()
        try:
            result = await asyncio.wait_for(client.read_resource(uri),
                                            self.spec.config.timeout_seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise self._call_failed(uri, exc) from exc
        return wire(result)

    def _call_failed(self, what: str, exc: Exception) -> McpCallError:
        message = describe(exc, self.spec)
        code = getattr(getattr(exc, "error", None), "code", None)
        if is_timeout(exc):
            return McpCallError(f"MCP server {self.name!r} did not answer {what} within "
                                f"{self.spec.config.timeout_seconds:g}s (timeoutSeconds).")
        if code is not None and code not in (-32000,) and not is_connection_lost(exc):
            # A JSON-RPC error answer: the server is alive and said no.
            return McpCallError(f"MCP server {self.name!r} answered {what} with an error: "
                                f"{message}")
        # The connection is gone (crash, exit, broken pipe): restart next time.
        if self.state == "ready":
            self._client = None
            self._failed(f"The connection broke during {what}: {message}")
            self._stop.set()
        tail = self.stderr.text(600) if self.stderr is not None else ""
        return McpCallError(f"MCP server {self.name!r} failed during {what}: {message}"
                            + (f"\nIts stderr ends with:\n{tail}" if tail else ""))
