// The Spark extension for VS Code: starts spark-lsp and lets vscode-languageclient serve its ghost text.
//
// Everything model-related happens in the server. This file only finds the binary, maps settings to the server's
// `initializationOptions` (and `workspace/didChangeConfiguration`), shows `spark/status` in the status bar and
// forwards the Spark commands to `workspace/executeCommand`; nextEdit.ts shows the next-edit hints.

import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import { GhostTextController, ReadyMessage } from "./ghostText";
import { NextEditController, NextEditsMessage } from "./nextEdit";

const LANGUAGES = ["rust", "typescript", "typescriptreact", "javascript"];

/** The object that `spark/status` answers and `spark/statusChanged` carries (docs/lsp-extensions.md). */
interface SparkStatus {
  state: "loading" | "ready" | "failed" | string;
  message?: string;
  model?: { path: string; arch?: string; sizeBytes?: number; fim?: boolean } | null;
  lastLatencyMs?: number | null;
}

/** What the server reads from `initializationOptions` and from `settings.spark`. */
export interface SparkOptions {
  model?: { path?: string; threads?: number };
  inline?: {
    enabled?: boolean;
    deadlineMs?: number;
    maxTokens?: number;
    minConfidence?: number;
    route?: "local" | "remote";
    /** Asks for `spark/inlineCompletionReady`, which this extension answers by asking for ghost text again. */
    notifyReady?: boolean;
  };
  /** `notify` asks for `spark/nextEditChanged`, which this extension shows as a hint. */
  nextEdit?: { enabled?: boolean; notify?: boolean };
  remote?: Record<string, unknown>;
  context?: Record<string, unknown>;
  /** The execution checks (the project's compiler and tests, in a scratch copy); off in an untrusted workspace. */
  verify?: { compile: boolean; runTests: boolean };
}

let client: LanguageClient | undefined;
let statusItem: vscode.StatusBarItem;
let outputChannel: vscode.LogOutputChannel;
let lastStatus: SparkStatus | undefined;
let nextEdits: NextEditController;
let ghostText: GhostTextController;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  outputChannel = vscode.window.createOutputChannel("Spark", { log: true });
  statusItem = vscode.window.createStatusBarItem("spark.status", vscode.StatusBarAlignment.Right, 100);
  statusItem.name = "Spark";
  statusItem.command = "spark.editor.showStatus";
  nextEdits = new NextEditController(() => client);
  ghostText = new GhostTextController(() => client, LANGUAGES);
  context.subscriptions.push(outputChannel, statusItem, nextEdits, ghostText);

  context.subscriptions.push(
    vscode.commands.registerCommand("spark.editor.fix", () => executeServerCommand("spark.fix")),
    vscode.commands.registerCommand("spark.editor.generateTests", () => executeServerCommand("spark.generateTests")),
    vscode.commands.registerCommand("spark.editor.generateRegex", () => executeServerCommand("spark.generateRegex")),
    vscode.commands.registerCommand("spark.editor.toggleSuperFastMode", toggleSuperFastMode),
    vscode.commands.registerCommand("spark.editor.showStatus", showStatus),
    vscode.commands.registerCommand("spark.editor.restartServer", restartServer),
    vscode.workspace.onDidChangeConfiguration(onDidChangeConfiguration),
    vscode.workspace.onDidGrantWorkspaceTrust(sendSettings),
  );

  await startClient();
}

export async function deactivate(): Promise<void> {
  await stopClient();
}

/** Maps the `spark.*` settings to the server's options; settings left at their "server default" are omitted. */
export function sparkOptions(): SparkOptions {
  const config = vscode.workspace.getConfiguration("spark");
  const model: SparkOptions["model"] = {};
  const modelPath = expandPath(config.get<string>("model.path", ""));
  if (modelPath) model.path = modelPath;
  const threads = config.get<number>("model.threads", 0);
  if (threads > 0) model.threads = threads;

  const inline: SparkOptions["inline"] = {
    enabled: config.get<boolean>("inline.enabled", true),
    route: config.get<"local" | "remote">("inline.route", "local"),
    notifyReady: true,
  };
  const deadlineMs = config.get<number>("inline.deadlineMs", 0);
  if (deadlineMs > 0) inline.deadlineMs = deadlineMs;
  const maxTokens = config.get<number>("inline.maxTokens", 0);
  if (maxTokens > 0) inline.maxTokens = maxTokens;
  const minConfidence = config.get<number | null>("inline.minConfidence", null);
  if (typeof minConfidence === "number" && minConfidence >= 0 && minConfidence <= 1) {
    inline.minConfidence = minConfidence;
  }

  const nextEdit = { enabled: config.get<boolean>("nextEdit.enabled", true), notify: true };
  // Checking an edit with the project's compiler runs the project's build (build scripts, proc macros): only in
  // a workspace the user trusts.
  const trusted = vscode.workspace.isTrusted;
  const verify = {
    compile: trusted && config.get<boolean>("verify.compile", true),
    runTests: trusted && config.get<boolean>("verify.runTests", true),
  };
  const options: SparkOptions = { model, inline, nextEdit, verify };
  // Passed through as the server reads them (see docs/configuration.md).
  const remote = config.get<Record<string, unknown>>("remote", {});
  if (remote && Object.keys(remote).length > 0) options.remote = remote;
  const context = config.get<Record<string, unknown>>("context", {});
  if (context && Object.keys(context).length > 0) options.context = context;
  return options;
}

async function startClient(): Promise<void> {
  const command = findServer();
  if (!command) {
    setStatusText("$(error) Spark", "spark-lsp not found: set spark.server.path or put spark-lsp on PATH");
    const choice = await vscode.window.showErrorMessage(
      "Spark: spark-lsp was not found. Set `spark.server.path` or put spark-lsp on PATH.",
      "Open Settings",
    );
    if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "spark.server.path");
    }
    return;
  }
  outputChannel.appendLine(`Starting ${command}`);

  const serverOptions: ServerOptions = { command, args: [], options: { env: process.env } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: LANGUAGES.flatMap((language) => [
      { scheme: "file", language },
      { scheme: "untitled", language },
    ]),
    initializationOptions: () => sparkOptions(),
    outputChannel,
    middleware: {
      // The latency in the status bar follows each ghost text answer.
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        const items = await next(document, position, context, token);
        scheduleStatusRefresh();
        return items;
      },
      workspace: {
        // The server may pull its settings; answer `spark` with the same mapped object as initializationOptions.
        configuration: async (params, token, next) => {
          const result = await next(params, token);
          if (!Array.isArray(result)) return result;
          return params.items.map((item, index) => (item.section === "spark" ? sparkOptions() : result[index]));
        },
      },
    },
  };

  const newClient = new LanguageClient("spark", "Spark", serverOptions, clientOptions);
  client = newClient;
  newClient.onNotification("spark/statusChanged", (status: SparkStatus) => updateStatus(status));
  newClient.onNotification("spark/nextEditChanged", (message: NextEditsMessage) => nextEdits.update(newClient, message));
  newClient.onNotification("spark/inlineCompletionReady", (message: ReadyMessage) => void ghostText.onReady(message));
  newClient.onDidChangeState((event) => {
    if (event.newState === State.Stopped) {
      nextEdits.clear();
      setStatusText("$(circle-slash) Spark", "The Spark server is not running");
    }
  });
  setStatusText("$(loading~spin) Spark", "Starting spark-lsp");
  try {
    await newClient.start();
  } catch (error) {
    outputChannel.appendLine(`spark-lsp failed to start: ${String(error)}`);
    setStatusText("$(error) Spark", `spark-lsp failed to start: ${String(error)}`);
    return;
  }
  ghostText.started();
  await refreshStatus();
}

async function stopClient(): Promise<void> {
  const oldClient = client;
  client = undefined;
  if (oldClient && oldClient.isRunning()) await oldClient.stop();
}

async function restartServer(): Promise<void> {
  await stopClient();
  await startClient();
}

/** The binary from `spark.server.path`, else `spark-lsp` from PATH, else undefined. */
function findServer(): string | undefined {
  const configured = expandPath(vscode.workspace.getConfiguration("spark").get<string>("server.path", ""));
  if (configured) return configured;
  const names = process.platform === "win32" ? ["spark-lsp.exe"] : ["spark-lsp"];
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    for (const name of names) {
      const candidate = path.join(dir, name);
      try {
        fs.accessSync(candidate, fs.constants.X_OK);
        if (fs.statSync(candidate).isFile()) return candidate;
      } catch {
        // Not in this directory.
      }
    }
  }
  return undefined;
}

function expandPath(value: string | undefined): string {
  if (!value) return "";
  let expanded = value.trim();
  if (expanded === "~" || expanded.startsWith("~/")) expanded = path.join(os.homedir(), expanded.slice(1));
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (folder) expanded = expanded.replace(/\$\{workspaceFolder\}/g, folder);
  return expanded;
}

async function onDidChangeConfiguration(event: vscode.ConfigurationChangeEvent): Promise<void> {
  if (!event.affectsConfiguration("spark")) return;
  if (event.affectsConfiguration("spark.server.path")) {
    await restartServer();
    return;
  }
  await sendSettings();
}

/** Sends the mapped settings to a running server (a setting changed, or the workspace became trusted). */
async function sendSettings(): Promise<void> {
  if (client && client.isRunning()) {
    await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { spark: sparkOptions() } });
  }
  renderStatus();
}

async function toggleSuperFastMode(): Promise<void> {
  const config = vscode.workspace.getConfiguration("spark");
  const route = config.get<string>("inline.route", "local") === "remote" ? "local" : "remote";
  // Write where the setting is already set, so that a workspace value is not shadowing the change.
  const inspected = config.inspect<string>("inline.route");
  const target =
    inspected?.workspaceFolderValue !== undefined
      ? vscode.ConfigurationTarget.WorkspaceFolder
      : inspected?.workspaceValue !== undefined
        ? vscode.ConfigurationTarget.Workspace
        : vscode.ConfigurationTarget.Global;
  await config.update("inline.route", route, target);
  vscode.window.setStatusBarMessage(`Spark: Super Fast Mode ${route === "remote" ? "on" : "off"} (${route})`, 3000);
}

async function executeServerCommand(command: string): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!client || !client.isRunning()) {
    void vscode.window.showWarningMessage("Spark: the server is not running");
    return;
  }
  if (!editor) {
    void vscode.window.showWarningMessage("Spark: open a file first");
    return;
  }
  const argument = {
    uri: client.code2ProtocolConverter.asUri(editor.document.uri),
    position: client.code2ProtocolConverter.asPosition(editor.selection.active),
  };
  try {
    // The server answers with a workspace/applyEdit request, which the language client applies.
    await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] });
  } catch (error) {
    void vscode.window.showErrorMessage(`Spark: ${command} failed: ${String(error)}`);
  }
}

let statusRefreshTimer: NodeJS.Timeout | undefined;
function scheduleStatusRefresh(): void {
  if (statusRefreshTimer) clearTimeout(statusRefreshTimer);
  statusRefreshTimer = setTimeout(() => void refreshStatus(), 100);
}

async function refreshStatus(): Promise<void> {
  if (!client || !client.isRunning()) return;
  try {
    updateStatus(await client.sendRequest<SparkStatus>("spark/status"));
  } catch (error) {
    outputChannel.appendLine(`spark/status failed: ${String(error)}`);
  }
}

async function showStatus(): Promise<void> {
  await refreshStatus();
  const status = lastStatus;
  if (!status) {
    void vscode.window.showInformationMessage("Spark: no status from the server yet");
    return;
  }
  const model = status.model ? `${path.basename(status.model.path)} (${status.model.arch ?? "?"})` : "no model";
  const latency = status.lastLatencyMs != null ? `, last ghost text ${Math.round(status.lastLatencyMs)} ms` : "";
  void vscode.window.showInformationMessage(`Spark: ${status.state}, ${model}${latency}`);
  outputChannel.show(true);
}

function updateStatus(status: SparkStatus): void {
  lastStatus = status;
  renderStatus();
}

function renderStatus(): void {
  const status = lastStatus;
  if (!status) return;
  const route = vscode.workspace.getConfiguration("spark").get<string>("inline.route", "local");
  const fast = route === "remote" ? " $(zap)" : "";
  let text: string;
  switch (status.state) {
    case "ready":
      text = status.lastLatencyMs != null ? `$(sparkle) Spark ${Math.round(status.lastLatencyMs)} ms` : "$(sparkle) Spark";
      break;
    case "failed":
      text = "$(error) Spark: failed";
      break;
    default:
      // "loading", and any state a newer server adds before the model is ready.
      text = `$(loading~spin) Spark: ${status.state}`;
  }
  const lines = [`Spark: ${status.state}`];
  if (status.message) lines.push(status.message);
  if (status.model) {
    const size = status.model.sizeBytes ? `, ${(status.model.sizeBytes / 1e6).toFixed(0)} MB` : "";
    lines.push(`Model: ${status.model.path} (${status.model.arch ?? "?"}${size}${status.model.fim ? ", FIM" : ""})`);
  }
  lines.push(`Route: ${route}${route === "remote" ? " (Super Fast Mode)" : ""}`);
  setStatusText(text + fast, lines.join("\n"));
}

function setStatusText(text: string, tooltip: string): void {
  statusItem.text = text;
  statusItem.tooltip = tooltip;
  statusItem.show();
}
