//! What a TLS ClientHello and ServerHello show in clear: the name asked (SNI), the protocols
//! offered (ALPN), whether a session is offered for resumption (a TLS 1.3 pre-shared key, a
//! TLS 1.2 ticket) and early data, and whether the server took it (its pre-shared key).

/// A ClientHello's clear fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientHello {
    pub sni: Option<String>,
    pub alpn: Vec<String>,
    /// A TLS 1.3 `pre_shared_key` or a non-empty TLS 1.2 `session_ticket`.
    pub resumption_offered: bool,
    pub early_data: bool,
    /// Its random: what a key log finds the connection's secrets by.
    pub random: [u8; 32],
}

/// A ServerHello's clear fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerHello {
    /// `0x0304` for TLS 1.3 (its `supported_versions`), else the legacy version.
    pub version: u16,
    /// TLS 1.3: the server chose the offered pre-shared key (the handshake resumed).
    pub resumed: bool,
    pub cipher_suite: u16,
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Some(h)
    }
    fn u8(&mut self) -> Option<usize> {
        Some(self.take(1)?[0] as usize)
    }
    fn u16(&mut self) -> Option<usize> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]) as usize)
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// The extensions of a hello body after its fixed part, as (type, data).
fn extensions(mut r: Reader<'_>) -> Vec<(usize, &[u8])> {
    let mut out = Vec::new();
    let Some(all) = r.vec16() else { return out };
    let mut e = Reader { b: all };
    while let (Some(kind), Some(data)) = (e.u16(), e.vec16()) {
        out.push((kind, data));
    }
    out
}

/// A ClientHello from a handshake message (type 1, with its 4-octet header); None when it is
/// not one or is cut short.
pub fn client_hello(msg: &[u8]) -> Option<ClientHello> {
    let mut r = Reader { b: msg };
    if r.u8()? != 1 {
        return None;
    }
    let len = (r.u8()? << 16) | r.u16()?;
    let mut r = Reader { b: r.take(len)? };
    r.take(2)?; // legacy version
    let random = <[u8; 32]>::try_from(r.take(32)?).ok()?;
    r.vec8()?; // session id
    r.vec16()?; // cipher suites
    r.vec8()?; // compression methods
    let mut hello = ClientHello { random, ..ClientHello::default() };
    for (kind, data) in extensions(r) {
        let mut d = Reader { b: data };
        match kind {
            0 => {
                if let Some(list) = d.vec16() {
                    let mut l = Reader { b: list };
                    while let (Some(t), Some(name)) = (l.u8(), l.vec16()) {
                        if t == 0 {
                            hello.sni = Some(String::from_utf8_lossy(name).into_owned());
                        }
                    }
                }
            }
            16 => {
                if let Some(list) = d.vec16() {
                    let mut l = Reader { b: list };
                    while let Some(p) = l.vec8() {
                        hello.alpn.push(String::from_utf8_lossy(p).into_owned());
                    }
                }
            }
            35 if !data.is_empty() => hello.resumption_offered = true,
            41 => hello.resumption_offered = true,
            42 => hello.early_data = true,
            _ => {}
        }
    }
    Some(hello)
}

/// A ServerHello from a handshake message (type 2, with its header).
pub fn server_hello(msg: &[u8]) -> Option<ServerHello> {
    let mut r = Reader { b: msg };
    if r.u8()? != 2 {
        return None;
    }
    let len = (r.u8()? << 16) | r.u16()?;
    let mut r = Reader { b: r.take(len)? };
    let legacy = r.u16()?;
    r.take(32)?;
    r.vec8()?; // session id
    let cipher_suite = r.u16()? as u16;
    r.u8()?; // compression
    let mut hello = ServerHello { version: legacy as u16, resumed: false, cipher_suite };
    for (kind, data) in extensions(r) {
        match kind {
            43 if data.len() == 2 => hello.version = u16::from_be_bytes([data[0], data[1]]),
            41 => hello.resumed = true,
            _ => {}
        }
    }
    Some(hello)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut v = kind.to_be_bytes().to_vec();
        v.extend((data.len() as u16).to_be_bytes());
        v.extend(data);
        v
    }

    fn hello(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![kind, 0];
        v.extend((body.len() as u16).to_be_bytes());
        v.extend(body);
        v
    }

    #[test]
    fn a_client_hello_shows_its_name_protocols_and_offered_session() {
        let mut exts = Vec::new();
        let name = b"dns.example";
        let mut sni = ((name.len() + 3) as u16).to_be_bytes().to_vec();
        sni.push(0);
        sni.extend((name.len() as u16).to_be_bytes());
        sni.extend(name);
        exts.extend(ext(0, &sni));
        exts.extend(ext(16, &[0, 7, 2, b'h', b'2', 3, b'd', b'o', b't']));
        exts.extend(ext(41, &[1, 2, 3]));
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let h = client_hello(&hello(1, &body)).unwrap();
        assert_eq!(h.sni.as_deref(), Some("dns.example"));
        assert_eq!(h.alpn, ["h2", "dot"]);
        assert!(h.resumption_offered && !h.early_data);
        // Cut short: none.
        assert_eq!(client_hello(&hello(1, &body)[..40]), None);
    }

    #[test]
    fn a_server_hello_shows_tls_1_3_and_a_taken_key() {
        let mut exts = ext(43, &[3, 4]);
        exts.extend(ext(41, &[0, 0]));
        let mut body = vec![3, 3];
        body.extend([1u8; 32]);
        body.extend([0, 0x13, 0x01, 0]);
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        assert_eq!(
            server_hello(&hello(2, &body)),
            Some(ServerHello { version: 0x0304, resumed: true, cipher_suite: 0x1301 })
        );
    }
}
