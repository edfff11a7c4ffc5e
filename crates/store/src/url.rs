//! Hiding credentials: a store URL may carry a password, and neither result documents (which
//! record the command line) nor messages may repeat it.

/// `s` with the password of any `postgres://` / `postgresql://` URL in it replaced by `***`
/// (`user:secret@host` and `?password=secret`); anything else unchanged.
pub fn redact(s: &str) -> String {
    let Some(start) = s.find("postgres://").or_else(|| s.find("postgresql://")) else {
        return s.to_string();
    };
    let scheme_end = start + s[start..].find("://").unwrap_or(0) + 3;
    let rest = &s[scheme_end..];
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, tail) = rest.split_at(auth_end);
    let auth = match auth.rfind('@') {
        Some(at) => match auth[..at].find(':') {
            Some(colon) => format!("{}:***{}", &auth[..colon], &auth[at..]),
            None => auth.to_string(),
        },
        None => auth.to_string(),
    };
    let mut tail = tail.to_string();
    for key in ["password=", "PASSWORD="] {
        let mut from = 0;
        while let Some(i) = tail[from..].find(key) {
            let v = from + i + key.len();
            let end = tail[v..]
                .find(['&', '#', ' '])
                .map_or(tail.len(), |e| v + e);
            tail.replace_range(v..end, "***");
            from = v + 3;
        }
    }
    format!("{}{auth}{tail}", &s[..scheme_end])
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_in_store_urls_are_hidden() {
        assert_eq!(
            redact("postgres://alice:s3cret@db.example:5432/punctual"),
            "postgres://alice:***@db.example:5432/punctual"
        );
        assert_eq!(
            redact("--store=postgresql://bob:p%40ss@h/db?sslmode=disable&password=x2&user=bob"),
            "--store=postgresql://bob:***@h/db?sslmode=disable&password=***&user=bob"
        );
        assert_eq!(redact("postgres://alice@h/db"), "postgres://alice@h/db");
        assert_eq!(
            redact("postgresql:///db?host=/tmp/s"),
            "postgresql:///db?host=/tmp/s"
        );
        assert_eq!(redact("--duration"), "--duration");
        assert_eq!(redact("/var/lib/results.db"), "/var/lib/results.db");
    }
}
