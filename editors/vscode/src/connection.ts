/**
 * Owns the LanguageClient: finds and starts the `agentls` server, forwards
 * settings through workspace/configuration, restarts it, and fans the
 * server's agentls/* notifications out to the chat view and status bar.
 */

import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  State,
  TransportKind,
  type LanguageClientOptions,
  type ServerOptions,
  type StreamInfo,
} from "vscode-languageclient/node";
import { Methods, type MessageDeltaParams, type MessageParams } from "./chat/protocol";
import { checkSocketPath, parseConnect, tokenFor, withToken, type ConnectTarget } from "./remoteServer";
import { discoverServer, expandPath } from "./serverPath";
import { showServerProgress } from "./serverProgress";
import { needsRestart, toWireSettings, type Inspected } from "./settings";
import { mcpStarting, type DidChangeStatus, type ServerState, type StatusResult } from "./status";

const SECTION = "agentls";
const ACCEPT_COMMAND = "agentls.inlineCompletionAccepted";

export class ServerConnection implements vscode.Disposable {
  client: LanguageClient | undefined;
  state: ServerState = "stopped";
  status: StatusResult | undefined;
  lastStatusNotification: DidChangeStatus | undefined;

  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  private readonly statusEmitter = new vscode.EventEmitter<void>();
  private readonly deltaEmitter = new vscode.EventEmitter<MessageDeltaParams>();
  private readonly messageEmitter = new vscode.EventEmitter<MessageParams>();
  readonly onDidChangeState = this.stateEmitter.event;
  readonly onDidChangeStatus = this.statusEmitter.event;
  readonly onMessageDelta = this.deltaEmitter.event;
  readonly onMessage = this.messageEmitter.event;

  private readonly disposables: vscode.Disposable[] = [];
  private clientDisposables: vscode.Disposable[] = [];
  private starting: Promise<void> | undefined;
  private statusTimer: ReturnType<typeof setTimeout> | undefined;
  private mcpTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.disposables.push(
      vscode.workspace.onDidChangeConfiguration((event) => this.configurationChanged(event)),
      this.stateEmitter,
      this.statusEmitter,
      this.deltaEmitter,
      this.messageEmitter,
    );
  }

  /** Starts the server unless it runs; resolves once it answered initialize. */
  start(): Promise<void> {
    if (this.client && this.state === "running") return Promise.resolve();
    if (!this.starting) {
      this.starting = this.doStart().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientDisposables) d.dispose();
    this.clientDisposables = [];
    if (client) {
      try {
        await client.stop(5000);
      } catch (error) {
        this.output.warn(`Stopping the server: ${String(error)}`);
      }
      await client.dispose();
    }
    this.setState("stopped");
  }

  /** Sends a request once the server runs; throws if it cannot start. */
  async request<R>(method: string, params: unknown, token?: vscode.CancellationToken): Promise<R> {
    await this.start();
    if (!this.client) throw new Error("The agentls server is not running. See Output > agentls.");
    // Never pass an undefined token: vscode-jsonrpc would then send the
    // params as a positional array [params, null].
    return token ? this.client.sendRequest<R>(method, params, token) : this.client.sendRequest<R>(method, params);
  }

  /** Sends a notification if the server runs (never starts it for one). */
  notify(method: string, params: unknown): void {
    if (this.client && this.state === "running") void this.client.sendNotification(method, params);
  }

  async refreshStatus(): Promise<void> {
    if (!this.client || this.state !== "running") return;
    try {
      this.status = await this.client.sendRequest<StatusResult>(Methods.status, {});
    } catch (error) {
      this.output.warn(`agentls/status failed: ${String(error)}`);
    }
    this.statusEmitter.fire();
    // MCP servers start in the background: ask again until none is starting,
    // so a failure reaches the status bar without waiting for a turn.
    if (mcpStarting(this.status) && !this.mcpTimer) {
      this.mcpTimer = setTimeout(() => {
        this.mcpTimer = undefined;
        void this.refreshStatus();
      }, 1000);
    }
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables) d.dispose();
  }

  private async doStart(): Promise<void> {
    const config = vscode.workspace.getConfiguration(SECTION);
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const remote = this.remoteServer(config, folders);
    if (remote === "failed") {
      this.setState("failed");
      return;
    }
    if (remote) {
      await this.startClient(remote.serverOptions, remote.initializationOptions, remote.label);
      return;
    }
    const discovery = discoverServer({
      configured: config.get<string>("server.path"),
      workspaceFolders: folders,
      pythonInterpreter: await selectedPythonInterpreter(),
      envPath: process.env.PATH,
      platform: process.platform,
      home: os.homedir(),
      isExecutable,
    });
    if (!discovery.found) {
      this.output.error(`${discovery.message}\nLooked at:\n  ${discovery.tried.join("\n  ")}`);
      this.setState("failed");
      void vscode.window
        .showErrorMessage(`agentls: ${discovery.message}`, "Configure", "Show Output")
        .then((choice) => {
          if (choice === "Configure") {
            void vscode.commands.executeCommand("workbench.action.openSettings", "agentls.server.path");
          } else if (choice === "Show Output") {
            this.output.show();
          }
        });
      return;
    }
    this.output.info(`Starting ${discovery.path} (found via ${discovery.source})`);

    const extraEnv = config.get<{ [key: string]: string }>("server.env") ?? {};
    const serverOptions: ServerOptions = {
      command: discovery.path,
      args: config.get<string[]>("server.args") ?? [],
      transport: TransportKind.stdio,
      options: { env: { ...process.env, ...extraEnv }, cwd: folders[0] },
    };
    await this.startClient(serverOptions, {}, discovery.path);
  }

  /**
   * `agentls.server.connect` set: connect to a running server (remoteServer.ts)
   * rather than start one. Undefined when it is empty; "failed" after telling
   * the user what is wrong.
   */
  private remoteServer(
    config: vscode.WorkspaceConfiguration,
    folders: string[],
  ): { serverOptions: ServerOptions; initializationOptions: Record<string, unknown>; label: string } | "failed" | undefined {
    const uid = typeof process.getuid === "function" ? process.getuid() : undefined;
    const parsed = parseConnect(config.get<string>("server.connect"), process.env, uid);
    if (!parsed) return undefined;
    const fail = (message: string): "failed" => {
      this.output.error(message);
      void vscode.window.showErrorMessage(message, "Configure").then((choice) => {
        if (choice === "Configure") {
          void vscode.commands.executeCommand("workbench.action.openSettings", "agentls.server.connect");
        }
      });
      return "failed";
    };
    if ("error" in parsed) return fail(parsed.error);
    const target = parsed.target;
    const configuredFile = config.get<string>("server.tokenFile")?.trim();
    const token = tokenFor(target, {
      env: process.env,
      uid,
      tokenFile: configuredFile ? expandPath(configuredFile, folders, os.homedir()) : undefined,
      readFile: (file) => fs.readFileSync(file, "utf8"),
    });
    if (token.error) return fail(token.error);
    const label = target.kind === "unix" ? `unix:${target.path}` : `tcp:${target.host}:${target.port}`;
    this.output.info(`Connecting to the running agentls server at ${label}`);
    const serverOptions = (): Promise<StreamInfo> => {
      // Checked at each (re)connect: who owns the socket can change while VS Code runs.
      const unsafe = target.kind === "unix" ? checkSocketPath(target.path, uid) : undefined;
      if (unsafe) {
        fail(unsafe);
        return Promise.reject(new Error(unsafe));
      }
      return connectTo(target);
    };
    return { serverOptions, initializationOptions: withToken({}, token.token), label };
  }

  private async startClient(
    serverOptions: ServerOptions,
    initializationOptions: Record<string, unknown>,
    label: string,
  ): Promise<void> {
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
      outputChannel: this.output,
      // Settings travel through workspace/configuration only (see
      // settings.ts): initializationOptions would outrank them and could
      // not change without a restart. (A running server's token goes here.)
      initializationOptions,
      middleware: {
        workspace: {
          configuration: async (params, token, next) => {
            const answer = await next(params, token);
            if (!Array.isArray(answer)) return answer;
            if (params.items.some((item) => item.section === SECTION)) this.settingsPulled();
            return params.items.map((item, i) =>
              item.section === SECTION ? wireSettings(item.scopeUri) : answer[i],
            );
          },
        },
      },
    };

    const client = new LanguageClient("agentls", "agentls", serverOptions, clientOptions);
    this.client = client;
    this.setState("starting");
    this.clientDisposables.push(
      client.onNotification(Methods.messageDelta, (p: MessageDeltaParams) => this.deltaEmitter.fire(p)),
      client.onNotification(Methods.message, (p: MessageParams) => this.messageEmitter.fire(p)),
      client.onNotification(Methods.didChangeStatus, (p: DidChangeStatus) => {
        this.lastStatusNotification = p;
        void this.refreshStatus();
      }),
      client.onDidChangeState((event) => {
        if (event.newState === State.Stopped && this.client === client && this.state === "running") {
          this.setState("failed");
        }
      }),
    );
    try {
      await client.start();
      this.clientDisposables.push(showServerProgress(client));
    } catch (error) {
      this.output.error(`The agentls server failed to start: ${String(error)}`);
      if (this.client === client) this.client = undefined;
      this.setState("failed");
      void vscode.window
        .showErrorMessage(`agentls: the server failed to start (${label}).`, "Show Output", "Configure")
        .then((choice) => {
          if (choice === "Show Output") this.output.show();
          if (choice === "Configure") {
            void vscode.commands.executeCommand("workbench.action.openSettings", "agentls.server");
          }
        });
      return;
    }
    this.registerAcceptFallback(client);
    this.setState("running");
    await this.refreshStatus();
  }

  /**
   * Inline completion items carry `agentls.inlineCompletionAccepted`; VS Code
   * runs it on Tab. The client forwards it to the server when the server
   * lists it in executeCommandProvider; otherwise a local no-op keeps VS
   * Code from reporting an unknown command.
   */
  private registerAcceptFallback(client: LanguageClient): void {
    const commands = client.initializeResult?.capabilities.executeCommandProvider?.commands ?? [];
    if (!commands.includes(ACCEPT_COMMAND)) {
      this.clientDisposables.push(vscode.commands.registerCommand(ACCEPT_COMMAND, () => undefined));
    }
  }

  private configurationChanged(event: vscode.ConfigurationChangeEvent): void {
    if (!event.affectsConfiguration(SECTION)) return;
    const restart = needsRestart(
      ["server.path", "server.args", "server.env", "server.connect", "server.tokenFile"].filter((key) => event.affectsConfiguration(`${SECTION}.${key}`)),
    );
    if (restart) {
      this.output.info("agentls.server.* changed: restarting the server");
      void this.restart();
      return;
    }
    if (this.client && this.state === "running") {
      // Pull model: the server asks for section "agentls" again, and the
      // configuration middleware refreshes the status bar after answering.
      void this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: null });
    }
  }

  /** The server reloads its settings after pulling them: show the result. */
  private settingsPulled(): void {
    if (this.statusTimer) clearTimeout(this.statusTimer);
    this.statusTimer = setTimeout(() => void this.refreshStatus(), 250);
  }

  private setState(state: ServerState): void {
    this.state = state;
    this.stateEmitter.fire(state);
  }
}

/** A socket to a running server, for the language client. */
function connectTo(target: ConnectTarget): Promise<StreamInfo> {
  return new Promise((resolve, reject) => {
    const socket =
      target.kind === "unix" ? net.connect({ path: target.path }) : net.connect({ host: target.host, port: target.port });
    socket.once("connect", () => resolve({ reader: socket, writer: socket }));
    socket.once("error", reject);
  });
}

function wireSettings(scopeUri?: string) {
  const scope = scopeUri ? vscode.Uri.parse(scopeUri) : undefined;
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  return toWireSettings((key) => config.inspect(key) as Inspected | undefined);
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The interpreter the Python extension selected, when it is installed. */
async function selectedPythonInterpreter(): Promise<string | undefined> {
  try {
    const python = vscode.extensions.getExtension("ms-python.python");
    if (!python) return undefined;
    const api = python.isActive ? python.exports : await python.activate();
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const env = api?.environments?.getActiveEnvironmentPath?.(resource);
    return typeof env?.path === "string" ? env.path : undefined;
  } catch {
    return undefined;
  }
}
