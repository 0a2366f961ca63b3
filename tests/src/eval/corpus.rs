//! The corpus: pinned crates and npm packages from `tests/eval/corpus.toml`, fetched with the ordinary clients
//! (`cargo vendor`, `npm pack`) into `target/eval/corpus/`, and the eval tools (`tsc`) installed by
//! `scripts/install-eval-tools.sh` into `target/eval/tools/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::eval_dir;
use crate::workspace_root;

/// Names reserved for outside checking: never part of the corpus.
pub const FORBIDDEN: [&str; 4] = ["semver", "smallvec", "petgraph", "zod"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Rust,
    Ts,
}

impl Lang {
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Ts => "ts",
        }
    }

    pub fn grammar(self) -> spark_grammars::Lang {
        match self {
            Lang::Rust => spark_grammars::Lang::Rust,
            Lang::Ts => spark_grammars::Lang::TypeScript,
        }
    }

    pub fn language_id(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Ts => "typescript",
        }
    }
}

/// Which side of the evaluation a package, spec or history is on. Defaults, sweeps and prompts are tuned on
/// `dev` only; `test` is held out (added after the tuning, never read while tuning) and is what the README and
/// closing notes report. Product fixtures come from neither side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    #[default]
    Dev,
    Test,
}

impl Split {
    pub const BOTH: [Split; 2] = [Split::Dev, Split::Test];

    pub fn name(self) -> &'static str {
        match self {
            Split::Dev => "dev",
            Split::Test => "test",
        }
    }

    /// `dev` or `test` (a manifest's `split` field, `--split`).
    pub fn parse(text: &str) -> Result<Split> {
        match text {
            "dev" => Ok(Split::Dev),
            "test" => Ok(Split::Test),
            other => bail!("split {other:?}: expected dev or test"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Package {
    pub lang: Lang,
    pub name: String,
    pub version: String,
    pub why: String,
    pub split: Split,
}

impl Package {
    /// The fetched sources.
    pub fn dir(&self) -> PathBuf {
        match self.lang {
            Lang::Rust => eval_dir().join("corpus/crates").join(format!("{}-{}", self.name, self.version)),
            Lang::Ts => eval_dir().join("corpus/npm").join(format!("{}-{}", self.slug(), self.version)),
        }
    }

    /// The name as a path component (`@tanstack/query-core` → `tanstack+query-core`).
    pub fn slug(&self) -> String {
        self.name.trim_start_matches('@').replace('/', "+")
    }

    /// Source files (relative paths, sorted): `src/**/*.rs`, or `src/**/*.ts` without declarations and tests.
    pub fn sources(&self) -> Vec<String> {
        source_files(self.lang, &self.dir())
    }

    pub fn read(&self, file: &str) -> Result<String> {
        std::fs::read_to_string(self.dir().join(file)).with_context(|| format!("reading {file} of {}", self.name))
    }
}

/// The source files of a fetched package at `dir` (relative paths, sorted): `src/**/*.rs`, or `src/**/*.ts`
/// without declarations and tests.
pub fn source_files(lang: Lang, dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    walk(dir, &dir.join("src"), &mut files);
    files.retain(|file| match lang {
        Lang::Rust => file.ends_with(".rs"),
        Lang::Ts => {
            file.ends_with(".ts") && !file.ends_with(".d.ts") && !file.contains(".test.") && !file.contains("test")
        }
    });
    files.sort();
    files
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(root, &path, out);
        } else if let Ok(relative) = path.strip_prefix(root) {
            out.push(relative.to_string_lossy().into_owned());
        }
    }
}

pub fn manifest_text() -> Result<String> {
    read_manifest_text("tests/eval/corpus.toml")
}

pub fn read_manifest_text(relative: &str) -> Result<String> {
    std::fs::read_to_string(workspace_root().join(relative)).with_context(|| format!("reading {relative}"))
}

/// The `[[crate]]` and `[[npm]]` tables of a manifest (`tests/eval/*.toml`): each with its language and a reader
/// of its string fields (an error names the missing one). A name reserved for outside checking is an error.
pub fn manifest_entries(relative: &str) -> Result<Vec<(Lang, Entry)>> {
    let document: toml_edit::DocumentMut = read_manifest_text(relative)?.parse().context(relative.to_owned())?;
    let mut entries = Vec::new();
    for (key, lang) in [("crate", Lang::Rust), ("npm", Lang::Ts)] {
        let Some(tables) = document.get(key).and_then(|item| item.as_array_of_tables()) else { continue };
        for table in tables.iter() {
            let fields =
                table.iter().filter_map(|(name, item)| Some((name.to_owned(), item.as_str()?.to_owned()))).collect();
            let entry = Entry { place: format!("{key} in {relative}"), fields };
            let name = entry.field("name")?;
            if FORBIDDEN.contains(&name.as_str()) {
                bail!("{name} is reserved for outside checking and may not be in {relative}");
            }
            entries.push((lang, entry));
        }
    }
    Ok(entries)
}

/// One table of a manifest.
pub struct Entry {
    place: String,
    fields: Vec<(String, String)>,
}

impl Entry {
    pub fn field(&self, name: &str) -> Result<String> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .with_context(|| format!("{}: no string `{name}`", self.place))
    }
}

/// The packages of `tests/eval/corpus.toml`.
pub fn manifest() -> Result<Vec<Package>> {
    manifest_entries("tests/eval/corpus.toml")?
        .into_iter()
        .map(|(lang, entry)| {
            Ok(Package {
                lang,
                name: entry.field("name")?,
                version: entry.field("version")?,
                why: entry.field("why")?,
                split: Split::parse(&entry.field("split")?)?,
            })
        })
        .collect()
}

/// Fetches what is missing: crates with `cargo vendor`, packages with `npm pack`.
pub fn fetch(packages: &[Package]) -> Result<()> {
    let crates: Vec<(&str, &str)> = packages
        .iter()
        .filter(|package| package.lang == Lang::Rust)
        .map(|package| (package.name.as_str(), package.version.as_str()))
        .collect();
    if packages.iter().any(|package| package.lang == Lang::Rust && !package.dir().join("Cargo.toml").exists()) {
        cargo_vendor(&crates, &eval_dir().join("fetch"), &eval_dir().join("corpus/crates"))
            .context("cargo vendor failed for the eval corpus")?;
    }
    // The crates' dev-dependencies into cargo's cache (and a Cargo.lock beside each crate): their own unit tests,
    // which judge fixes and generated tests, use them, and the checks build offline.
    for package in packages.iter().filter(|package| package.lang == Lang::Rust) {
        if !package.dir().join("Cargo.lock").exists() {
            cargo_fetch(&package.dir())?;
        }
    }
    for package in packages.iter().filter(|package| package.lang == Lang::Ts) {
        if !package.dir().join("package.json").exists() {
            npm_unpack(&package.name, &package.version, &eval_dir().join("corpus/npm-packs"), &package.dir())?;
        }
    }
    Ok(())
}

/// Vendors `crates` (name, exact version) through a scratch cargo project in `project` into `out`, one
/// `name-version` directory each (and their dependencies).
pub fn cargo_vendor(crates: &[(&str, &str)], project: &Path, out: &Path) -> Result<()> {
    std::fs::create_dir_all(project)?;
    let mut manifest = String::from(
        "[package]\nname = \"spark-eval-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[lib]\npath = \"lib.rs\"\n\n[workspace]\n\n[dependencies]\n",
    );
    for (name, version) in crates {
        manifest.push_str(&format!("{name} = \"={version}\"\n"));
    }
    std::fs::write(project.join("Cargo.toml"), manifest)?;
    std::fs::write(project.join("lib.rs"), "")?;
    let status = Command::new("cargo")
        .args(["vendor", "--versioned-dirs", "--quiet", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .arg(out)
        .stdout(std::process::Stdio::null())
        .status()
        .context("running cargo vendor")?;
    if !status.success() {
        bail!("cargo vendor failed for {crates:?}");
    }
    Ok(())
}

/// `cargo fetch` for the crate in `dir`: its dependencies and dev-dependencies into cargo's cache, `Cargo.lock`
/// beside it. Run on a copy outside this repository (under it, cargo takes the crate for a member of Spark's
/// workspace).
fn cargo_fetch(dir: &Path) -> Result<()> {
    let copy = std::env::temp_dir().join(format!("spark-eval-fetch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    copy_tree(dir, &copy)?;
    let manifest = std::fs::read_to_string(copy.join("Cargo.toml"))?;
    if !manifest.lines().any(|line| line.trim() == "[workspace]") {
        std::fs::write(copy.join("Cargo.toml"), format!("{manifest}\n[workspace]\n"))?;
    }
    let output = Command::new("cargo")
        .args(["fetch", "--quiet", "--manifest-path"])
        .arg(copy.join("Cargo.toml"))
        .output()
        .context("running cargo fetch")?;
    let copied = output.status.success() && std::fs::copy(copy.join("Cargo.lock"), dir.join("Cargo.lock")).is_ok();
    let _ = std::fs::remove_dir_all(&copy);
    if !copied {
        bail!("cargo fetch failed for {}: {}", dir.display(), String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(())
}

/// Copies the tree at `from` to `to` (made when missing).
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// `npm pack name@version` into `tarballs`, unpacked into `dir`.
pub fn npm_unpack(name: &str, version: &str, tarballs: &Path, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(tarballs)?;
    let output = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(tarballs)
        .arg(format!("{name}@{version}"))
        .output()
        .context("running npm pack")?;
    if !output.status.success() {
        bail!("npm pack {name}@{version} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let tarball = String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or("").trim().to_owned();
    std::fs::create_dir_all(dir)?;
    let status = Command::new("tar")
        .arg("xzf")
        .arg(tarballs.join(&tarball))
        .args(["--strip-components=1", "-C"])
        .arg(dir)
        .status()?;
    if !status.success() {
        bail!("unpacking {tarball} failed");
    }
    Ok(())
}

/// The TypeScript compiler the checks run (installed on demand).
pub fn tsc() -> PathBuf {
    eval_dir().join("tools/node_modules/typescript/bin/tsc")
}

/// Puts the eval tools' `node_modules/.bin` (tsc) first on this process's PATH, for the servers it starts.
pub fn put_tools_on_path() {
    let bin = eval_dir().join("tools/node_modules/.bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let joined = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path)));
    if let Ok(joined) = joined {
        // Set once at start-up, before any thread or child process.
        std::env::set_var("PATH", joined);
    }
}

pub fn types_dir() -> PathBuf {
    eval_dir().join("tools/node_modules/@types")
}

/// Installs the eval tools when they are missing (`scripts/install-eval-tools.sh`).
pub fn ensure_tools() -> Result<()> {
    if tsc().exists() {
        return Ok(());
    }
    let status = Command::new("bash")
        .arg(workspace_root().join("scripts/install-eval-tools.sh"))
        .status()
        .context("running scripts/install-eval-tools.sh")?;
    if !status.success() || !tsc().exists() {
        bail!("scripts/install-eval-tools.sh did not install tsc");
    }
    Ok(())
}

/// Manifest, fetch and tools in one go.
pub fn prepare() -> Result<Vec<Package>> {
    let packages = manifest()?;
    fetch(&packages)?;
    ensure_tools()?;
    Ok(packages)
}
