//! Finding the project around a file (the crate, Cargo workspace or TypeScript package copied into scratch), its
//! TypeScript compiler, and the cache directory the copies live under. Reads the file system; runs nothing.

use std::path::{Path, PathBuf};

/// The build system of a project root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectKind {
    Cargo,
    Node,
}

/// The directory copied into scratch, and where the edited file sits in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub kind: ProjectKind,
    /// What is copied: the crate, the Cargo workspace around it, or the TypeScript package.
    pub root: PathBuf,
    /// The edited file, relative to `root`.
    pub file: PathBuf,
    /// Cargo: the package to check inside a workspace (`-p`). Node: unused.
    pub package: Option<String>,
    /// Cargo: the crate's directory relative to `root` (where `src/` is). Node: the tsconfig's directory.
    pub crate_dir: PathBuf,
    /// Node: the `node_modules` to link into the copy (the nearest one at or above the root).
    pub node_modules: Option<PathBuf>,
}

/// Finds the project of `file`: the nearest `Cargo.toml` (widened to its workspace when an ancestor manifest has
/// `[workspace]`) for Rust, the nearest `tsconfig.json` or `package.json` for TypeScript.
pub fn find_project(file: &Path) -> Option<Project> {
    let extension = file.extension()?.to_str()?;
    let kind = match extension {
        "rs" => ProjectKind::Cargo,
        "ts" | "tsx" | "mts" | "cts" | "js" | "jsx" => ProjectKind::Node,
        _ => return None,
    };
    let mut dir = file.parent();
    while let Some(current) = dir {
        match kind {
            ProjectKind::Cargo if current.join("Cargo.toml").is_file() => {
                let manifest = std::fs::read_to_string(current.join("Cargo.toml")).ok()?;
                let package = package_name(&manifest);
                let root = workspace_root(current).unwrap_or_else(|| current.to_owned());
                return Some(Project {
                    kind,
                    file: file.strip_prefix(&root).ok()?.to_owned(),
                    crate_dir: current.strip_prefix(&root).ok()?.to_owned(),
                    root,
                    package,
                    node_modules: None,
                });
            }
            ProjectKind::Node if current.join("tsconfig.json").is_file() || current.join("package.json").is_file() => {
                let node_modules = current.ancestors().map(|dir| dir.join("node_modules")).find(|dir| dir.is_dir());
                return Some(Project {
                    kind,
                    root: current.to_owned(),
                    file: file.strip_prefix(current).ok()?.to_owned(),
                    package: None,
                    crate_dir: PathBuf::new(),
                    node_modules,
                });
            }
            _ => {}
        }
        dir = current.parent();
    }
    None
}

/// The `name` under `[package]` of a manifest (a plain reading: enough for `cargo -p`).
pub fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
            continue;
        }
        if !in_package {
            continue;
        }
        if let Some(value) = line.strip_prefix("name").map(str::trim_start).and_then(|rest| rest.strip_prefix('=')) {
            return Some(value.trim().trim_matches('"').to_owned());
        }
    }
    None
}

/// The nearest ancestor of `crate_dir` whose manifest declares `[workspace]` (the crate's own counts).
fn workspace_root(crate_dir: &Path) -> Option<PathBuf> {
    crate_dir.ancestors().find_map(|dir| {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        manifest.lines().any(|line| line.trim() == "[workspace]").then(|| dir.to_owned())
    })
}

/// The project's own `tsc`, else one on PATH.
pub(super) fn find_tsc(project: &Project) -> Option<PathBuf> {
    if let Some(tsc) = project.node_modules.as_ref().map(|dir| dir.join(".bin/tsc")).filter(|tsc| tsc.exists()) {
        return Some(tsc);
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| Path::new(dir).join("tsc")).find(|tsc| tsc.is_file())
}

/// The project's `tsc` (its own in node_modules/.bin, else one on PATH).
pub fn project_tsc(project: &Project) -> Option<PathBuf> {
    find_tsc(project)
}

/// The user's cache directory for Spark: `$XDG_CACHE_HOME/spark`, else `~/.cache/spark`.
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("spark"))
}

/// FNV-1a of the root's path: a stable name for its scratch directory.
pub fn root_hash(root: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in root.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_are_found_from_the_file_up() {
        let dir = std::env::temp_dir().join(format!("spark-exec-find-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws/crates/a/src")).unwrap();
        std::fs::write(dir.join("ws/Cargo.toml"), "[workspace]\nmembers = [\"crates/a\"]\n").unwrap();
        std::fs::write(dir.join("ws/crates/a/Cargo.toml"), "[package]\nname = \"a\"\n").unwrap();
        let found = find_project(&dir.join("ws/crates/a/src/lib.rs")).unwrap();
        assert_eq!((found.root, found.file), (dir.join("ws"), PathBuf::from("crates/a/src/lib.rs")));
        assert_eq!((found.package.as_deref(), found.crate_dir), (Some("a"), PathBuf::from("crates/a")));
        std::fs::create_dir_all(dir.join("pkg/src")).unwrap();
        std::fs::create_dir_all(dir.join("node_modules")).unwrap();
        std::fs::write(dir.join("pkg/tsconfig.json"), "{}").unwrap();
        let found = find_project(&dir.join("pkg/src/m.ts")).unwrap();
        assert_eq!((found.kind, found.root), (ProjectKind::Node, dir.join("pkg")));
        assert_eq!(found.node_modules, Some(dir.join("node_modules")));
        assert_eq!(find_project(&dir.join("pkg/notes.txt")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
