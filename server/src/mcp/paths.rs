//! The workspace root of `spark-lsp mcp`: every path a tool names is resolved under it, after symlinks, and
//! refused when it lands outside; files are read with a size limit and written only when the root allows it.

use std::path::{Component, Path, PathBuf};

/// The largest file a tool reads (Spark's documents stop being parsed well before this).
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// The root a server was started with, canonical (symlinks resolved).
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
    allow_write: bool,
}

impl Root {
    pub fn new(dir: &Path, allow_write: bool) -> anyhow::Result<Root> {
        let dir = std::fs::canonicalize(dir)
            .map_err(|error| anyhow::anyhow!("the workspace root {} cannot be opened: {error}", dir.display()))?;
        if !dir.is_dir() {
            anyhow::bail!("the workspace root {} is not a directory", dir.display());
        }
        Ok(Root { dir, allow_write })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn allow_write(&self) -> bool {
        self.allow_write
    }

    /// An existing file named relative to the root (or absolute), canonical and inside the root.
    pub fn existing_file(&self, path: &str) -> Result<PathBuf, String> {
        let joined = self.join(path)?;
        let canonical = std::fs::canonicalize(&joined).map_err(|error| format!("{path}: cannot open it: {error}"))?;
        self.inside(path, canonical)
    }

    /// A file that may not exist yet (a TypeScript test file a task creates): its parent folder must exist and,
    /// canonical, be inside the root; an existing file is resolved like [`Root::existing_file`].
    pub fn file_to_write(&self, path: &Path) -> Result<PathBuf, String> {
        let shown = path.display().to_string();
        if path.exists() || path.is_symlink() {
            return self.existing_file(&shown);
        }
        let joined = self.join(&shown)?;
        let (Some(parent), Some(name)) = (joined.parent(), joined.file_name()) else {
            return Err(format!("{shown}: not a file path"));
        };
        let parent =
            std::fs::canonicalize(parent).map_err(|error| format!("{shown}: its folder cannot be opened: {error}"))?;
        self.inside(&shown, parent.join(name))
    }

    /// The file's text, refused past [`MAX_FILE_BYTES`] or when it is not UTF-8.
    pub fn read(&self, file: &Path) -> Result<String, String> {
        let size = std::fs::metadata(file).map_err(|error| format!("{}: {error}", self.shown(file)))?.len();
        if size > MAX_FILE_BYTES {
            return Err(format!("{}: {size} bytes; Spark reads files up to {MAX_FILE_BYTES} bytes", self.shown(file)));
        }
        let bytes = std::fs::read(file).map_err(|error| format!("{}: {error}", self.shown(file)))?;
        String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", self.shown(file)))
    }

    /// Writes `text` to `file` (already resolved inside the root), only when the server was started with
    /// `--allow-write`.
    pub fn write(&self, file: &Path, text: &str) -> Result<(), String> {
        if !self.allow_write {
            return Err("writing is off: start the server with --allow-write to let `write: true` apply edits".into());
        }
        let file = self.file_to_write(file)?;
        std::fs::write(&file, text).map_err(|error| format!("{}: cannot write: {error}", self.shown(&file)))
    }

    /// The path as the client should see it: relative to the root when inside it.
    pub fn shown(&self, file: &Path) -> String {
        file.strip_prefix(&self.dir).unwrap_or(file).display().to_string()
    }

    fn join(&self, path: &str) -> Result<PathBuf, String> {
        if path.trim().is_empty() {
            return Err("the file path is empty".into());
        }
        if path.contains('\0') {
            return Err("the file path contains a NUL byte".into());
        }
        let path = Path::new(path);
        Ok(if path.is_absolute() { path.to_owned() } else { self.dir.join(path) })
    }

    fn inside(&self, asked: &str, canonical: PathBuf) -> Result<PathBuf, String> {
        // Canonical paths have no `..` left; the component check guards against a platform where that is not so.
        let clean = !canonical.components().any(|part| matches!(part, Component::ParentDir));
        if clean && canonical.starts_with(&self.dir) {
            Ok(canonical)
        } else {
            Err(format!(
                "{asked}: outside the workspace root {} (after resolving symlinks); refused",
                self.dir.display()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("spark-mcp-paths-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/src")).unwrap();
        std::fs::write(dir.join("root/src/lib.rs"), "fn a() {}\n").unwrap();
        std::fs::write(dir.join("secret.rs"), "fn s() {}\n").unwrap();
        dir
    }

    #[test]
    fn inside_paths_resolve_and_escapes_are_refused() {
        let dir = scratch("escape");
        let root = Root::new(&dir.join("root"), false).unwrap();
        assert!(root.existing_file("src/lib.rs").unwrap().ends_with("root/src/lib.rs"));
        assert!(root.existing_file("src/../src/lib.rs").is_ok());
        let escape = root.existing_file("../secret.rs").unwrap_err();
        assert!(escape.contains("outside the workspace root"), "{escape}");
        let absolute = dir.join("secret.rs").display().to_string();
        assert!(root.existing_file(&absolute).unwrap_err().contains("outside"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.join("secret.rs"), dir.join("root/link.rs")).unwrap();
            assert!(root.existing_file("link.rs").unwrap_err().contains("outside"));
            std::os::unix::fs::symlink(&dir, dir.join("root/up")).unwrap();
            assert!(root.file_to_write(&dir.join("root/up/new.rs")).unwrap_err().contains("outside"));
        }
        assert!(root.file_to_write(&dir.join("root/src/new.rs")).is_ok());
        assert!(root.existing_file("").is_err());
    }

    #[test]
    fn writing_needs_the_flag() {
        let dir = scratch("write");
        let root = Root::new(&dir.join("root"), false).unwrap();
        let file = root.existing_file("src/lib.rs").unwrap();
        assert!(root.write(&file, "x").unwrap_err().contains("--allow-write"));
        let root = Root::new(&dir.join("root"), true).unwrap();
        root.write(&file, "fn b() {}\n").unwrap();
        assert_eq!(root.read(&file).unwrap(), "fn b() {}\n");
    }
}
