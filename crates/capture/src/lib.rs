//! dnscost-capture: a packet capture's DNS traffic as flows (`flows`), read from a pcap or
//! pcapng file (`read`, the only I/O); the packets' headers (`packet`), TCP directions put in
//! order and cut into DNS messages or TLS records (`stream`), the TLS hellos (`tls`), and
//! TLS 1.3 records opened with a key log (`decrypt`).

pub mod decrypt;
pub mod flows;
pub mod packet;
pub mod read;
pub mod stream;
pub mod tls;
