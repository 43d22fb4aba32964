//! DoH requests as HPACK-encoded templates: the header fields a request carries
//! ([`Headers`]), encoded once per kind of request so that sending one costs no encoding but
//! content-length's.

use super::hpack;

pub(super) const DNS_MESSAGE: &[u8] = b"application/dns-message";

/// The method of a request template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// The DNS message is the body; the header block gets its content-length.
    Post,
    /// The DNS message is in the path (`?dns=`); no body.
    Get,
}

/// Which header fields a request carries, and how they are encoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Headers {
    /// What DoH needs (RFC 8484 §4.1): `:method`, `:scheme`, `:authority`, `:path`, `accept`,
    /// and for POST `content-type` and `content-length`; string literals raw, `:path` of a
    /// POST shared.
    #[default]
    Minimal,
    /// What Chromium sends for DoH (net/dns/dns_transaction.cc), in its order: the pseudo-
    /// fields as `:method`, `:authority`, `:scheme`, `:path`, then `accept`, `accept-language:
    /// *`, `user-agent: Chrome`, `accept-encoding: identity`, for POST `content-type`, and last
    /// `content-length`. String literals are Huffman-coded when shorter, and Chromium's HPACK
    /// encoder's indexing policy is kept: every field but the pseudo-fields other than
    /// `:authority` enters the table, so `:path` is always a literal. One difference:
    /// content-length is never indexed (Chromium's encoder indexes each length it sends).
    Browser,
}

/// One header field of a template, its name a static-table entry.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field<'a> {
    /// A field the static table holds whole (`:method`, `:scheme`).
    Static(usize),
    /// A literal; `shared` fields are the same in every request of the template and enter the
    /// server's dynamic table.
    Literal { name: usize, value: &'a [u8], shared: bool },
}

/// A request's header fields, HPACK-encoded once in three forms, so that sending one costs no
/// encoding but content-length's. `:method` and `:scheme` are static-table indices. The fields
/// every request of the template shares (see [`Headers`]) are literals that enter the server's
/// dynamic table in the first request of a connection, and references to those entries in
/// later ones: a few octets, as the requests of browsers and dnsperf (nghttp2) are, so that the
/// server decodes what it decodes in practice. When the server's table is too small they are
/// literals without indexing. A GET's `:path` (the query) is always a literal without indexing.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    pub(super) method: Method,
    pub(super) strings: hpack::Strings,
    /// Identifies the shared fields: templates with the same key may use each other's entries.
    pub(super) key: u64,
    /// Octets the shared fields take in the server's dynamic table.
    pub(super) table_size: usize,
    pub(super) insert: Vec<u8>,
    pub(super) indexed: Vec<u8>,
    pub(super) plain: Vec<u8>,
}

impl RequestTemplate {
    /// A DoH POST to `path` at `authority`; [`Client::send`] adds content-length.
    pub fn post(headers: Headers, authority: &str, path: &str) -> Self {
        Self::new(Method::Post, headers, authority, path)
    }

    /// A DoH GET of `path_and_query` (the query in `?dns=`) at `authority`.
    pub fn get(headers: Headers, authority: &str, path_and_query: &str) -> Self {
        Self::new(Method::Get, headers, authority, path_and_query)
    }

    fn new(method: Method, headers: Headers, authority: &str, path: &str) -> Self {
        use std::hash::{Hash, Hasher};
        let fields = match headers {
            Headers::Minimal => minimal_fields(method, authority.as_bytes(), path.as_bytes()),
            Headers::Browser => browser_fields(method, authority.as_bytes(), path.as_bytes()),
        };
        let strings = match headers {
            Headers::Minimal => hpack::Strings::Raw,
            Headers::Browser => hpack::Strings::Huffman,
        };
        let capacity = 128 + authority.len() + path.len();
        let (mut insert, mut indexed, mut plain) =
            (Vec::with_capacity(capacity), Vec::with_capacity(capacity), Vec::with_capacity(capacity));
        // Entries enter in field order, so the last shared one is dynamic index 62.
        let shared = fields.iter().filter(|f| matches!(f, Field::Literal { shared: true, .. })).count();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let (mut table_size, mut entered) = (0, 0);
        for field in fields {
            match field {
                Field::Static(index) => {
                    for block in [&mut insert, &mut indexed, &mut plain] {
                        hpack::put_indexed(block, index);
                    }
                }
                Field::Literal { name, value, shared: true } => {
                    hpack::put_literal(&mut plain, name, value, strings);
                    hpack::put_literal_indexing(&mut insert, name, value, strings);
                    hpack::put_indexed(&mut indexed, hpack::DYNAMIC_BASE + shared - 1 - entered);
                    entered += 1;
                    table_size += hpack::entry_size(hpack::static_name(name), value);
                    (name, value).hash(&mut hasher);
                }
                Field::Literal { name, value, shared: false } => {
                    for block in [&mut insert, &mut indexed, &mut plain] {
                        hpack::put_literal(block, name, value, strings);
                    }
                }
            }
        }
        RequestTemplate { method, strings, key: hasher.finish(), table_size, insert, indexed, plain }
    }

    pub fn method(&self) -> Method {
        self.method
    }
}

pub(super) fn method_field(method: Method) -> Field<'static> {
    Field::Static(match method {
        Method::Post => hpack::METHOD_POST,
        Method::Get => hpack::METHOD_GET,
    })
}

/// [`Headers::Minimal`]'s fields.
pub(super) fn minimal_fields<'a>(method: Method, authority: &'a [u8], path: &'a [u8]) -> Vec<Field<'a>> {
    let post = method == Method::Post;
    let mut fields = vec![
        method_field(method),
        Field::Static(hpack::SCHEME_HTTPS),
        Field::Literal { name: hpack::AUTHORITY, value: authority, shared: true },
        Field::Literal { name: hpack::PATH, value: path, shared: post },
        Field::Literal { name: hpack::ACCEPT, value: DNS_MESSAGE, shared: true },
    ];
    if post {
        fields.push(Field::Literal { name: hpack::CONTENT_TYPE, value: DNS_MESSAGE, shared: true });
    }
    fields
}

/// [`Headers::Browser`]'s fields.
pub(super) fn browser_fields<'a>(method: Method, authority: &'a [u8], path: &'a [u8]) -> Vec<Field<'a>> {
    let mut fields = vec![
        method_field(method),
        Field::Literal { name: hpack::AUTHORITY, value: authority, shared: true },
        Field::Static(hpack::SCHEME_HTTPS),
        Field::Literal { name: hpack::PATH, value: path, shared: false },
        Field::Literal { name: hpack::ACCEPT, value: DNS_MESSAGE, shared: true },
        Field::Literal { name: hpack::ACCEPT_LANGUAGE, value: b"*", shared: true },
        Field::Literal { name: hpack::USER_AGENT, value: b"Chrome", shared: true },
        Field::Literal { name: hpack::ACCEPT_ENCODING, value: b"identity", shared: true },
    ];
    if method == Method::Post {
        fields.push(Field::Literal { name: hpack::CONTENT_TYPE, value: DNS_MESSAGE, shared: true });
    }
    fields
}
