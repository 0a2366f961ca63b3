//! Privacy rules: which files' text must never reach a model, whatever the settings say. The settings add
//! their own ignore list on top (`context.ignore`, see [`crate::config::Settings::is_excluded`]).

/// Files whose contents must never reach a model: environment files, keys and certificates.
pub fn is_secret_path(path: &str) -> bool {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path).to_ascii_lowercase();
    let name = name.as_str();
    name == ".env"
        || name.starts_with(".env.")
        || name.ends_with(".env")
        || [".pem", ".key", ".p12", ".pfx", ".crt", ".cer", ".jks", ".keystore", ".gpg", ".asc"]
            .iter()
            .any(|extension| name.ends_with(extension))
        || ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"].iter().any(|key| name.starts_with(key))
        || name == ".netrc"
        || name == ".npmrc"
        || name == ".pypirc"
        || name == "credentials"
        || name.contains("secret")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_files() {
        for secret in [
            "file:///p/.env",
            "file:///p/.env.local",
            "/home/u/.ssh/id_rsa",
            "/p/certs/server.pem",
            "/p/a.key",
            "file:///p/config/secrets.json",
            "C:\\p\\prod.env",
        ] {
            assert!(is_secret_path(secret), "{secret}");
        }
        for ordinary in ["file:///p/src/main.rs", "/p/src/env.ts", "/p/keyboard.rs", "/p/README.md"] {
            assert!(!is_secret_path(ordinary), "{ordinary}");
        }
    }
}
