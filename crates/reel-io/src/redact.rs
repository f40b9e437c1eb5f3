//! URIs safe to print: credentials a user put inside a store URI
//! (`s3://KEY:SECRET@bucket/…`, `?aws_secret_access_key=…`) never reach an error message,
//! a log line or a JSON report. Environment credentials are never part of a URI, so they
//! are never printed at all.

use std::borrow::Cow;

/// `uri` with its user information and the values of its secret-looking query
/// parameters (names with `secret`, `token`, `password`, `signature`, `credential` or
/// `key`) replaced by `***`.
///
/// ```
/// assert_eq!(reel_io::redact("s3://AKIA:sekrit@bucket/eps?region=eu"), "s3://***@bucket/eps?region=eu");
/// assert_eq!(
///     reel_io::redact("s3://b/x?aws_secret_access_key=sekrit&region=eu"),
///     "s3://b/x?aws_secret_access_key=***&region=eu"
/// );
/// assert_eq!(reel_io::redact("/data/eps"), "/data/eps");
/// ```
pub fn redact(uri: &str) -> Cow<'_, str> {
    let Some(scheme_end) = uri.find("://") else {
        return Cow::Borrowed(uri);
    };
    let rest = &uri[scheme_end + 3..];
    let before_query = rest.find('?').unwrap_or(rest.len());
    // User information ends at an `@`: the one in the authority, or a later one when what
    // precedes it reads `user:secret` (secret keys hold `/`, which users rarely escape).
    let user = rest[..before_query]
        .rfind('@')
        .filter(|&at| rest[..at].contains(':'))
        .or_else(|| {
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            rest[..authority_end].rfind('@')
        });
    let after_user = user.map_or(0, |at| at + 1);
    let host_end = rest[after_user..]
        .find(['/', '?', '#'])
        .map_or(rest.len(), |i| after_user + i);
    let host = &rest[after_user..host_end];
    let tail = &rest[host_end..];
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let secret_param = |name: &str| {
        let name = name.to_ascii_lowercase();
        [
            "secret",
            "token",
            "password",
            "signature",
            "credential",
            "key",
        ]
        .iter()
        .any(|word| name.contains(word))
    };
    let query_redacted = query.map(|q| {
        q.split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if secret_param(name) => format!("{name}=***"),
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    if user.is_none() && query_redacted.as_deref() == query {
        return Cow::Borrowed(uri);
    }
    let mut out = format!(
        "{}{}{host}{path}",
        &uri[..scheme_end + 3],
        if user.is_some() { "***@" } else { "" }
    );
    if let Some(q) = query_redacted {
        out.push('?');
        out.push_str(&q);
    }
    Cow::Owned(out)
}

/// `text` with every URI in it passed through [`redact`]: for messages that may quote a
/// URI anywhere (a whole error chain, a JSON line).
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The URI starts at its scheme: the letters right before `://`.
        let scheme_start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let end = rest[at..]
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '`' | '"' | '\'' | ')' | ']' | '>' | ',')
            })
            .map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..scheme_start]);
        out.push_str(&redact(&rest[scheme_start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_uris_never_print() {
        let text = "reading `s3://AKIA:sek/rit@bucket/x.mcap?endpoint=http://h:9&aws_secret_access_key=sekrit`: refused, \"s3://u:pw@b/y\" too";
        let safe = redact_secrets(text);
        assert!(!safe.contains("sek"), "{safe}");
        assert!(!safe.contains("pw@"), "{safe}");
        assert!(
            safe.contains("s3://***@bucket/x.mcap?endpoint=http://h:9&aws_secret_access_key=***"),
            "{safe}"
        );
        assert!(safe.contains("\"s3://***@b/y\" too"), "{safe}");
        assert_eq!(redact_secrets("no uri here"), "no uri here");
        assert_eq!(redact("s3://bucket/a@b.mcap"), "s3://bucket/a@b.mcap");
        assert_eq!(
            redact("s3://b/x?session_token=t&region=r"),
            "s3://b/x?session_token=***&region=r"
        );
    }
}
