//! A vendor repository's signing key on an apt host: fetched *on the host* (with apt's own
//! downloader, `/usr/lib/apt/apt-helper download-file`, present wherever apt is and using
//! apt's proxy settings, so the key comes the way the packages will), brought back as base64,
//! dearmored here when it is ASCII-armored (as vendors publish them: `gpg --dearmor` without
//! needing gpg on the host), checked to be an OpenPGP public key, and written as the binary
//! keyring `/etc/apt/keyrings/NAME.gpg` that the source's `signed-by=` names. Files cross the
//! commands seam as base64 (the files seam carries text), written beside the target and
//! renamed, so a keyring is never half written.

use super::manager::{Failure, Ran, classify, run_argv, tidy};
use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use opsbook_base::config::keys;

/// Where apt looks for keyrings named by `signed-by=` (apt 2.4 and later make it).
pub(crate) const KEYRINGS: &str = "/etc/apt/keyrings";

/// Fetches the key at `url` on the host: its bytes, dearmored. An unreachable URL is a
/// `Failure::Unreachable` naming it; anything else than an OpenPGP public key is refused.
pub(crate) fn fetch(cx: &Context, url: &str) -> VerbResult<Vec<u8>> {
    // apt-helper downloads as the _apt user where it can; a 0700 temporary directory is root's,
    // so the download goes unsandboxed, which it notes on stderr (shown only on failure).
    let script = "set -e\ntmp=$(mktemp -d)\ntrap 'rm -rf \"$tmp\"' EXIT\n\
                  /usr/lib/apt/apt-helper -q download-file \"$1\" \"$tmp/key\" >&2\nbase64 -w0 \"$tmp/key\"\n";
    let argv: Vec<String> = ["sh", "-c", script, "sh", url].iter().map(|s| s.to_string()).collect();
    let ran = run_argv(cx, &argv, None, cx.config().duration(keys::PACKAGE_TIMEOUT))?;
    if ran.code != 0 {
        return Err(fail(Failure::Unreachable { url: url.to_string(), said: apt_said(&ran) }.to_string()));
    }
    let bytes = decode(ran.stdout.trim()).ok_or_else(|| fail(format!("the key from {url} came back garbled")))?;
    let key = if is_armored(&bytes) {
        dearmor(&String::from_utf8_lossy(&bytes))
            .ok_or_else(|| fail(format!("{url} is an ASCII-armored block that does not decode")))?
    } else {
        bytes
    };
    if !is_public_key(&key) {
        let start: String =
            String::from_utf8_lossy(&key[..key.len().min(40)]).chars().filter(|c| !c.is_control()).collect();
        return Err(fail(format!(
            "{url} is not an OpenPGP public key (it begins `{start}`)\n  help: give the key's URL as the vendor documents it (repository_key)"
        )));
    }
    Ok(key)
}

/// The keyring at `path` on the host, `None` when there is none.
pub(crate) fn read(cx: &Context, path: &str) -> VerbResult<Option<Vec<u8>>> {
    let script = "test -e \"$1\" || exit 3\nbase64 -w0 \"$1\"\n";
    let argv: Vec<String> = ["sh", "-c", script, "sh", path].iter().map(|s| s.to_string()).collect();
    let ran = run_argv(cx, &argv, None, cx.config().duration(keys::TOOLS_TIMEOUT))?;
    match ran.code {
        0 => Ok(Some(decode(ran.stdout.trim()).ok_or_else(|| fail(format!("{path} came back garbled")))?)),
        3 => Ok(None),
        code => Err(fail(format!(
            "cannot read {path}: exit status {code}{}",
            opsbook_base::process::said_on_stderr(&ran.stderr)
        ))),
    }
}

/// Writes `key` to `path` (mode 0644, its directory made 0755): beside it, then renamed.
pub(crate) fn write(cx: &Context, path: &str, key: &[u8]) -> VerbResult<()> {
    let script = "set -e\numask 022\nmkdir -p \"$(dirname \"$1\")\"\nbase64 -d >\"$1.opsbook-new\"\n\
                  chmod 0644 \"$1.opsbook-new\"\nmv -f \"$1.opsbook-new\" \"$1\"\n";
    let argv: Vec<String> = ["sh", "-c", script, "sh", path].iter().map(|s| s.to_string()).collect();
    let ran = run_argv(cx, &argv, Some(encode(key)), cx.config().duration(keys::TOOLS_TIMEOUT))?;
    if ran.code != 0 {
        return Err(fail(format!(
            "cannot write {path}: exit status {}{}",
            ran.code,
            opsbook_base::process::said_on_stderr(&ran.stderr)
        )));
    }
    Ok(())
}

/// What apt's downloader said of a failure: why the fetch failed, else its `E:` lines, else all.
fn apt_said(ran: &Ran) -> String {
    let text = format!("{}{}", ran.stderr, ran.stdout);
    if let Some(Failure::Unreachable { said, .. }) = classify(&text) {
        return said;
    }
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("E: ") && !l.contains("Download Failed")).collect();
    let said = if errors.is_empty() { text.trim().to_string() } else { errors.join("; ") };
    tidy(said.trim_start_matches("E: "))
}

fn is_armored(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).contains("-----BEGIN PGP PUBLIC KEY BLOCK-----")
}

/// The binary key of an ASCII-armored block (RFC 4880 §6.2): the base64 lines between the
/// headers' blank line and the checksum line (`=XXXX`) or the END line.
fn dearmor(text: &str) -> Option<Vec<u8>> {
    let mut lines = text.lines().map(str::trim_end).skip_while(|l| !l.starts_with("-----BEGIN PGP PUBLIC KEY BLOCK"));
    lines.next()?;
    // Armor headers (`Version: …`, `Comment: …`) end at the first blank line.
    let body: String = lines
        .skip_while(|l| !l.is_empty())
        .skip(1)
        .take_while(|l| !l.starts_with('=') && !l.starts_with("-----"))
        .collect();
    decode(&body).filter(|b| !b.is_empty())
}

/// Whether the bytes begin with an OpenPGP public-key packet (tag 6), old or new format.
fn is_public_key(bytes: &[u8]) -> bool {
    let Some(&first) = bytes.first() else { return false };
    if first & 0x80 == 0 {
        return false;
    }
    let tag = if first & 0x40 != 0 { first & 0x3f } else { (first >> 2) & 0x0f };
    tag == 6
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding, as coreutils' `base64` reads and writes it.
fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes base64 (whitespace ignored); `None` for anything else.
fn decode(text: &str) -> Option<Vec<u8>> {
    let symbols: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !symbols.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(symbols.len() / 4 * 3);
    for quad in symbols.chunks(4) {
        let pad = quad.iter().rev().take_while(|b| **b == b'=').count();
        let mut n = 0u32;
        for (i, b) in quad.iter().enumerate() {
            let v = if i >= 4 - pad { 0 } else { ALPHABET.iter().position(|a| a == b)? as u32 };
            n |= v << (18 - 6 * i);
        }
        out.extend(n.to_be_bytes()[1..4 - pad].iter());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real ed25519 key as `gpg --armor --export` writes it, and its first bytes dearmored.
    const ARMORED: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: a test key\n\n\
        mDMEawbd3xYJKwYBBAHaRw8BAQdAZ5hUlvpZvH4agN+AoFBK0AcLrY2ZtRu/Ep/J\n=AbCd\n\
        -----END PGP PUBLIC KEY BLOCK-----\n";

    #[test]
    fn base64_round_trips_and_refuses_what_is_not() {
        for text in ["", "a", "ab", "abc", "abcd", "key\u{0}\u{ff}"] {
            let encoded = encode(text.as_bytes());
            assert_eq!(decode(&encoded).as_deref(), Some(text.as_bytes()), "{encoded}");
        }
        assert_eq!(encode(b"opsbook"), "b3BzYm9vaw==");
        assert_eq!(decode("b3Bz\nYm9v aw=="), Some(b"opsbook".to_vec()));
        assert_eq!(decode("b3B"), None);
        assert_eq!(decode("b3B!"), None);
    }

    #[test]
    fn an_armored_key_is_dearmored_to_its_packets() {
        assert!(is_armored(ARMORED.as_bytes()));
        let key = dearmor(ARMORED).expect("dearmored");
        assert_eq!(&key[..4], &[0x98, 0x33, 0x04, 0x6b]);
        assert!(is_public_key(&key), "old-format packet, tag 6");
        assert!(is_public_key(&[0xc6, 0x33]), "new-format packet, tag 6");
        assert!(!is_public_key(b"<!DOCTYPE html>"));
        assert!(!is_public_key(&[0x88, 0x01]), "a signature packet (tag 2)");
        assert_eq!(dearmor("no armor here"), None);
    }
}
