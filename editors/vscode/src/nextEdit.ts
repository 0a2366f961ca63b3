// Next-edit suggestions: a hint at the edit Spark predicts the user makes next (`spark/nextEditChanged`), Tab to
// move the cursor onto it, Tab again to apply it, Esc to hide it (docs/lsp-extensions.md, `spark/nextEdit`).
//
// The server computes the edits; this file only shows the first one while the document is at the version they
// were computed for, and applies them only at that version.

import * as vscode from "vscode";
import { LanguageClient, Range as LspRange } from "vscode-languageclient/node";

/** The params of `spark/nextEditChanged`, and the result of `spark/nextEdit`. */
export interface NextEditsMessage {
  uri: string;
  version: number;
  edits: { range: LspRange; newText: string; label?: string; source?: string }[];
}

interface NextEdit {
  range: vscode.Range;
  newText: string;
  label: string;
}

/** The edits predicted for one version of one document. */
interface Prediction {
  uri: string;
  version: number;
  edits: NextEdit[];
}

/** The context key that the Tab and Esc bindings of package.json test. */
const VISIBLE_CONTEXT = "spark.nextEditVisible";

export class NextEditController implements vscode.Disposable {
  /** The last prediction received for each document, keyed by `Uri.toString()`. */
  private readonly predictions = new Map<string, Prediction>();
  /** A prediction the user hid with Esc; it stays hidden until the server sends another. */
  private dismissed: Prediction | undefined;
  private visible = false;
  private readonly highlight = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor("editor.wordHighlightStrongBackground"),
    border: "1px dashed",
    borderColor: new vscode.ThemeColor("editorGhostText.foreground"),
  });
  private readonly hint = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor("editorGhostText.foreground"), margin: "0 0 0 2em" },
  });
  private readonly disposables: vscode.Disposable[];

  constructor(private readonly client: () => LanguageClient | undefined) {
    this.disposables = [
      this.highlight,
      this.hint,
      vscode.commands.registerCommand("spark.nextEdit.jumpOrAccept", () => this.jumpOrAccept()),
      vscode.commands.registerCommand("spark.nextEdit.acceptAll", () => this.acceptAll()),
      vscode.commands.registerCommand("spark.nextEdit.dismiss", () => this.dismiss()),
      // An edit makes the shown prediction stale; the server sends a fresh one once the user pauses.
      vscode.workspace.onDidChangeTextDocument(() => this.render()),
      vscode.window.onDidChangeActiveTextEditor(() => this.render()),
      vscode.workspace.onDidCloseTextDocument((document) => this.predictions.delete(document.uri.toString())),
    ];
  }

  dispose(): void {
    void vscode.commands.executeCommand("setContext", VISIBLE_CONTEXT, false);
    for (const disposable of this.disposables) disposable.dispose();
  }

  /** Takes a prediction from the server (the notification, or the answer to `spark/nextEdit`). */
  update(client: LanguageClient, message: NextEditsMessage | null | undefined): void {
    if (!message || typeof message.uri !== "string" || !Array.isArray(message.edits)) return;
    const uri = client.protocol2CodeConverter.asUri(message.uri).toString();
    this.predictions.set(uri, {
      uri,
      version: message.version,
      edits: message.edits.map((edit) => ({
        range: client.protocol2CodeConverter.asRange(edit.range),
        newText: edit.newText,
        label: (edit.label ?? `→ ${edit.newText}`).replace(/`/g, ""),
      })),
    });
    this.dismissed = undefined;
    this.render();
  }

  /** Forgets every prediction (the server stopped). */
  clear(): void {
    this.predictions.clear();
    this.render();
  }

  /** The prediction to show in `editor`: made for the document's current version, with edits, not dismissed. */
  private current(editor: vscode.TextEditor | undefined): Prediction | undefined {
    if (!editor) return undefined;
    const prediction = this.predictions.get(editor.document.uri.toString());
    if (!prediction || prediction === this.dismissed || prediction.edits.length === 0) return undefined;
    return prediction.version === editor.document.version ? prediction : undefined;
  }

  private render(): void {
    const active = vscode.window.activeTextEditor;
    for (const editor of vscode.window.visibleTextEditors) {
      const prediction = editor === active ? this.current(editor) : undefined;
      const first = prediction?.edits[0];
      if (!first) {
        editor.setDecorations(this.highlight, []);
        editor.setDecorations(this.hint, []);
        continue;
      }
      const lineEnd = editor.document.lineAt(first.range.start.line).range.end;
      editor.setDecorations(this.highlight, [first.range]);
      editor.setDecorations(this.hint, [
        {
          range: new vscode.Range(lineEnd, lineEnd),
          renderOptions: { after: { contentText: `⇥ Spark: ${first.label}` } },
          hoverMessage: "Spark next edit: Tab to go there, Tab again to apply, Esc to hide",
        },
      ]);
    }
    const visible = this.current(active) !== undefined;
    if (visible !== this.visible) {
      this.visible = visible;
      void vscode.commands.executeCommand("setContext", VISIBLE_CONTEXT, visible);
    }
  }

  /** Tab: moves the cursor onto the first edit; when it is already there, applies that edit. */
  private async jumpOrAccept(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const prediction = this.current(editor);
    if (!editor || !prediction) {
      // The hint went stale between the key and this command: Tab does what it does without Spark.
      await vscode.commands.executeCommand("tab");
      return;
    }
    const first = prediction.edits[0];
    if (!first.range.contains(editor.selection.active)) {
      editor.selection = new vscode.Selection(first.range.start, first.range.end);
      editor.revealRange(first.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      return;
    }
    await this.apply(editor, prediction, [first]);
  }

  private async acceptAll(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    let prediction = this.current(editor);
    if (editor && !prediction) {
      // No hint shown (stale, dismissed, or the notification is off): ask for the edits of this version.
      await this.refresh(editor);
      prediction = this.current(editor);
    }
    if (!editor || !prediction) {
      vscode.window.setStatusBarMessage("Spark: no next edit predicted", 3000);
      return;
    }
    await this.apply(editor, prediction, prediction.edits);
  }

  private dismiss(): void {
    this.dismissed = this.current(vscode.window.activeTextEditor);
    this.render();
  }

  /** Applies `edits` (made for `prediction.version`) in one undo step, then asks for what comes next. */
  private async apply(editor: vscode.TextEditor, prediction: Prediction, edits: NextEdit[]): Promise<void> {
    if (editor.document.version !== prediction.version) return;
    const document = editor.document;
    const end = edits.length === 1 ? document.offsetAt(edits[0].range.start) + edits[0].newText.length : undefined;
    const applied = await editor.edit((builder) => {
      for (const edit of edits) builder.replace(edit.range, edit.newText);
    });
    if (!applied) return;
    if (end !== undefined) {
      // The cursor after the new text, as if typed: the next Tab goes on to the next edit.
      const position = document.positionAt(end);
      editor.selection = new vscode.Selection(position, position);
    }
    await this.refresh(editor);
  }

  /** Asks `spark/nextEdit` for the edits predicted at the document's current version, from the cursor on. */
  private async refresh(editor: vscode.TextEditor): Promise<void> {
    const client = this.client();
    if (!client || !client.isRunning()) return;
    try {
      const message = await client.sendRequest<NextEditsMessage | null>("spark/nextEdit", {
        textDocument: { uri: client.code2ProtocolConverter.asUri(editor.document.uri) },
        position: client.code2ProtocolConverter.asPosition(editor.selection.active),
      });
      this.update(client, message);
    } catch {
      // An older server without next edits answers MethodNotFound: nothing to show.
      this.predictions.delete(editor.document.uri.toString());
      this.render();
    }
  }
}
