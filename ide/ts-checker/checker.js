// Spark's resident TypeScript checker: one TypeScript language service for one project (the scratch copy of a
// package), kept warm between candidates so that a candidate's diagnostics cost what changed, not a `tsc` start.
//
// Usage: node checker.js <typescript.js> <project dir> <tsconfig.json or "">
// Requests, one JSON object a line on stdin: {"id": 1, "file": "src/a.ts", "text": "..."}; `text` is the file's
// candidate text, held in memory (null: the file as it is on disk). Answers, one a line on stdout:
// {"id": 1, "output": "<errors as `tsc --pretty false` prints them>", "checked": 2, "ms": 41, "programMs": 12,
// "times": [25, 4]} (the program brought up to date, then each checked file's diagnostics) or {"id", "error"}.
// The errors are those of the file and of the project's files that import it, syntactic and semantic, plus the
// options' and global ones; the rest of the project is not re-checked. Exits when stdin closes (the server went).
'use strict';

const fs = require('fs');
const path = require('path');
const readline = require('readline');

const [typescriptPath, projectDir, configName] = process.argv.slice(2);
const ts = require(typescriptPath);

// Without a tsconfig, the options Spark's `tsc` command line uses for a file alone. Bundler resolution takes
// relative imports with and without `.js` (or `.ts`), so a package whose tsconfig is not published (an npm
// tarball) keeps its own style of imports.
const FILE_ALONE = {
  strict: true,
  skipLibCheck: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  allowImportingTsExtensions: true,
  noEmit: true,
};

let options = FILE_ALONE;
let rootNames = [];
let configErrors = [];
// The one file held in memory: {file, text, version}.
let override = null;
let memoryVersion = 0;
// Files under node_modules (the compiler's lib files, installed packages) do not change while Spark runs.
const fixedVersions = new Map();
const snapshots = new Map();
// Per file version: the files it imports, resolved.
const importsCache = new Map();

function diskVersion(fileName) {
  const fixed = fixedVersions.get(fileName);
  if (fixed !== undefined) return fixed;
  let version;
  try {
    const stat = fs.statSync(fileName);
    version = `${stat.mtimeMs}:${stat.size}`;
  } catch {
    version = 'absent';
  }
  if (fileName.includes('/node_modules/')) fixedVersions.set(fileName, version);
  return version;
}

function scriptVersion(fileName) {
  return override && override.file === fileName ? override.version : diskVersion(fileName);
}

function readText(fileName) {
  if (override && override.file === fileName) return override.text;
  return ts.sys.readFile(fileName);
}

function scriptSnapshot(fileName) {
  const version = scriptVersion(fileName);
  const cached = snapshots.get(fileName);
  if (cached && cached.version === version) return cached.snapshot;
  const text = readText(fileName);
  if (text === undefined) return undefined;
  const snapshot = ts.ScriptSnapshot.fromString(text);
  snapshots.set(fileName, { version, snapshot });
  return snapshot;
}

const host = {
  getCompilationSettings: () => options,
  getScriptFileNames: () => rootNames,
  getScriptVersion: scriptVersion,
  getScriptSnapshot: scriptSnapshot,
  getCurrentDirectory: () => projectDir,
  getDefaultLibFileName: (compilerOptions) => ts.getDefaultLibFilePath(compilerOptions),
  fileExists: (fileName) => (override && override.file === fileName) || ts.sys.fileExists(fileName),
  readFile: (fileName) => readText(fileName),
  readDirectory: ts.sys.readDirectory,
  directoryExists: ts.sys.directoryExists,
  getDirectories: ts.sys.getDirectories,
  realpath: ts.sys.realpath,
  useCaseSensitiveFileNames: () => ts.sys.useCaseSensitiveFileNames,
};

const service = ts.createLanguageService(host, ts.createDocumentRegistry());

const formatHost = {
  getCanonicalFileName: (fileName) => fileName,
  getCurrentDirectory: () => projectDir,
  getNewLine: () => '\n',
};

// The tsconfig is read again for every request (it globs the project: a file made since, a generated test, is in).
function loadConfig(file) {
  if (configName) {
    const parsed = ts.getParsedCommandLineOfConfigFile(
      path.join(projectDir, configName),
      { noEmit: true },
      { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (diagnostic) => { configErrors = [diagnostic]; } },
    );
    if (parsed) {
      options = { ...parsed.options, noEmit: true };
      rootNames = parsed.fileNames.slice();
      configErrors = parsed.errors;
    }
  } else {
    options = FILE_ALONE;
    rootNames = [];
  }
  if (file && !rootNames.includes(file) && host.fileExists(file)) rootNames.push(file);
}

function importsOf(sourceFile) {
  const version = scriptVersion(sourceFile.fileName);
  const cached = importsCache.get(sourceFile.fileName);
  if (cached && cached.version === version) return cached.files;
  const files = new Set();
  for (const imported of ts.preProcessFile(sourceFile.text, true, true).importedFiles) {
    const resolved = ts.resolveModuleName(imported.fileName, sourceFile.fileName, options, host).resolvedModule;
    if (resolved) files.add(resolved.resolvedFileName);
  }
  importsCache.set(sourceFile.fileName, { version, files });
  return files;
}

function handle(request) {
  const started = Date.now();
  const file = path.resolve(projectDir, request.file);
  if (typeof request.text === 'string') {
    if (!override || override.file !== file || override.text !== request.text) {
      memoryVersion += 1;
      override = { file, text: request.text, version: `memory:${memoryVersion}` };
    }
  } else {
    override = null;
  }
  loadConfig(file);
  const program = service.getProgram();
  const programMs = Date.now() - started;
  const checked = [];
  if (program.getSourceFile(file)) checked.push(file);
  for (const sourceFile of program.getSourceFiles()) {
    if (sourceFile.fileName === file || sourceFile.isDeclarationFile) continue;
    if (program.isSourceFileFromExternalLibrary(sourceFile)) continue;
    if (importsOf(sourceFile).has(file)) checked.push(sourceFile.fileName);
  }
  const diagnostics = [...configErrors, ...service.getCompilerOptionsDiagnostics()];
  const times = [];
  for (const fileName of checked) {
    const fileStarted = Date.now();
    diagnostics.push(...service.getSyntacticDiagnostics(fileName), ...service.getSemanticDiagnostics(fileName));
    times.push(Date.now() - fileStarted);
  }
  const errors = diagnostics.filter((diagnostic) => diagnostic.category === ts.DiagnosticCategory.Error);
  const output = ts.formatDiagnostics(errors, formatHost);
  return { id: request.id, output, checked: checked.length, ms: Date.now() - started, programMs, times };
}

function answer(value) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    answer({ id: null, error: 'a request that is not JSON' });
    return;
  }
  try {
    answer(handle(request));
  } catch (error) {
    answer({ id: request.id, error: String((error && error.stack) || error) });
  }
});
lines.on('close', () => process.exit(0));
answer({ id: 0, ready: true, version: ts.version });
