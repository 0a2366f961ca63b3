// Ghost text that arrives when the user pauses (docs/lsp-extensions.md):
// - `spark/didFocus`: the server is told which document and cursor the user looks at (an editor became active,
//   or the cursor moved after a pause), so that the prompt there is warm before the first keystroke;
// - `spark/inlineCompletionReady`: a suggestion the server's deadline cut was finished in the background; when the
//   document and cursor are still where it was asked, VS Code is asked again (`editor.action.inlineSuggest.trigger`)
//   and the server answers from its cache.

import * as vscode from "vscode";
import { LanguageClient } from "vscode-languageclient/node";

/** The params of `spark/inlineCompletionReady`. */
export interface ReadyMessage {
  textDocument: { uri: string; version: number };
  position: { line: number; character: number };
}

/** Milliseconds the cursor must rest before its place is sent as `spark/didFocus`. */
const FOCUS_DEBOUNCE_MS = 150;

export class GhostTextController implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  private focusTimer: NodeJS.Timeout | undefined;
  private lastFocus = "";

  constructor(
    private readonly client: () => LanguageClient | undefined,
    private readonly languages: string[],
  ) {
    this.disposables.push(
      vscode.window.onDidChangeActiveTextEditor((editor) => this.scheduleFocus(editor, 0)),
      // A jump (mouse, keys, search) leaves the new place cold; after typing the place is warm already and the
      // server finds nothing to do.
      vscode.window.onDidChangeTextEditorSelection((event) => this.scheduleFocus(event.textEditor, FOCUS_DEBOUNCE_MS)),
    );
  }

  /** The editor is now showing its first document: tell the server where the cursor is. */
  started(): void {
    this.lastFocus = "";
    this.scheduleFocus(vscode.window.activeTextEditor, 0);
  }

  /** A suggestion is ready: ask for it again if the user is still where it was asked. */
  async onReady(message: ReadyMessage): Promise<void> {
    const client = this.client();
    const editor = vscode.window.activeTextEditor;
    if (!client || !editor) return;
    const uri = client.code2ProtocolConverter.asUri(editor.document.uri);
    const cursor = client.code2ProtocolConverter.asPosition(editor.selection.active);
    const same =
      uri === message.textDocument.uri &&
      editor.document.version === message.textDocument.version &&
      editor.selection.isEmpty &&
      cursor.line === message.position.line &&
      cursor.character === message.position.character;
    if (!same) return;
    await vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
  }

  private scheduleFocus(editor: vscode.TextEditor | undefined, delayMs: number): void {
    if (this.focusTimer) clearTimeout(this.focusTimer);
    if (!editor || !this.languages.includes(editor.document.languageId)) return;
    this.focusTimer = setTimeout(() => void this.sendFocus(editor), delayMs);
  }

  private async sendFocus(editor: vscode.TextEditor): Promise<void> {
    const client = this.client();
    if (!client || !client.isRunning() || vscode.window.activeTextEditor !== editor) return;
    const textDocument = { uri: client.code2ProtocolConverter.asUri(editor.document.uri) };
    const position = client.code2ProtocolConverter.asPosition(editor.selection.active);
    const key = `${textDocument.uri}:${editor.document.version}:${position.line}:${position.character}`;
    if (key === this.lastFocus) return;
    this.lastFocus = key;
    try {
      await client.sendNotification("spark/didFocus", { textDocument, position });
    } catch {
      // The server stopped meanwhile; the next start sends the focus again.
    }
  }

  dispose(): void {
    if (this.focusTimer) clearTimeout(this.focusTimer);
    for (const disposable of this.disposables) disposable.dispose();
  }
}
